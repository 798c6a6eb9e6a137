"""`--fix --run`: run the code before and after the whole fix in the verifier's sandbox, and judge
each metric the applied fixes should move, with the verifier's own rules and words.

The runs come from the caller (the CLI and the web app pass the verifier's isolated run: the
reviewer itself never runs code). Counts (transfers, syncs, compilations) repeat exactly across
processes, so one run per side decides them; peak RSS is noisy, so where a fix should move it the
two sides run `repeats` times, interleaved, and a change counts only if every after-run beats every
before-run by the noise margin (max(20 MiB, 5 % of the smallest before-run); the verifier's
evaluators/verify/metrics.py, kept equal by a test). Wall time is shown, never judged.

"Per step" divides by the steps of the run's step loop: the loop that ran the most iterations in
one call (the verifier's attribution names it); "-" where the run does not report it.

A donation fix (JM401) is judged as the verifier's buffer-donation pair is: the bytes of donated
inputs that the run's jitted calls consumed and XLA aliased to their outputs ("donated (aliased)
bytes", per device, summed over the calls; the verifier's probe reads them from each compiled
program and each call) should increase, 0 before and more after being "confirmed"; and peak RSS
(device peak memory on GPU/TPU) should decrease. Without donation a call's old and new buffers
coexist, so the saving to expect is about the bytes of the largest donating call: where that is
below peak RSS's noise margin, a peak RSS that does not drop beyond the margin is "not measurable
here" instead of "not confirmed" (and the donation row decides); no repeats are run for it unless
the first runs show a drop beyond the margin, which the repeats then confirm or not.
"""
from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable
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


def expected(codes: Iterable[str]) -> dict[str, tuple[str, tuple[str, ...]]]:
    out: dict[str, tuple[str, tuple[str, ...]]] = {}
    for code in codes:
        for metric, expect, backends in EXPECTED.get(code, ()):
            out.setdefault(metric, (expect, backends))
    return out


def needs_repeats(codes: Iterable[str], backend: str | None, before: dict | None = None,
                  after: dict | None = None) -> bool:
    """Whether a noisy metric decides: one a fix should move on this backend, unless (given the
    first runs) the saving to expect is below its noise and the first runs show no change beyond it
    either (then it is "not measurable here"; where they do show one, the repeats decide)."""
    return any(METRICS[m][2] == "rss" and backend in b
               and not (below_noise(m, before, after) and not _moved_beyond_noise(m, e, before, after))
               for m, (e, b) in expected(codes).items())


def _moved_beyond_noise(metric: str, expect: str, before: dict | None, after: dict | None) -> bool:
    b, a = (before or {}).get(metric), (after or {}).get(metric)
    if b is None or a is None:
        return False
    margin = threshold(metric, [b])
    return a < b - margin if expect == "decrease" else a > b + margin


def donated_more(before: dict | None, after: dict | None) -> float | None:
    """How many more bytes the after-run donated (aliased) than the before-run, in all; None where
    either run does not report it."""
    b, a = (before or {}).get("alias_bytes"), (after or {}).get("alias_bytes")
    if b is None or a is None:
        return None
    return a - b


def below_noise(metric: str, before: dict | None, after: dict | None) -> str | None:
    """Why a change of `metric` cannot show here, or None. Peak RSS and a donation fix: without
    donation a call's old and new buffers coexist, so the saving to expect is about the bytes the
    largest call donated; below the noise margin a saving of that size cannot be told from noise."""
    if metric != "peak_rss" or not before or not after or before.get("peak_rss") is None:
        return None
    more = donated_more(before, after)
    largest = after.get("alias_max_call_bytes")
    if more is None or more <= 0 or largest is None:
        return None       # nothing more donated: peak RSS is judged (and the donation row says why)
    margin = threshold(metric, [before["peak_rss"]])
    if largest >= margin:
        return None
    calls = after.get("aliased_calls") or 0
    return (f"the largest call donates {_fmt('alias_bytes', largest)} ({_fmt('alias_bytes', more)} more in the whole "
            f"run, over {calls} call{'s' if calls != 1 else ''}); a saving of that size is below peak RSS's noise "
            f"margin of {_fmt('peak_rss', margin)}, so it could not be told from noise")


def threshold(metric: str, before: list[float]) -> float:
    if METRICS[metric][2] == "rss":
        return max(RSS_NOISE_FLOOR, RSS_NOISE_FRACTION * min(before))
    return 0.0


def _ok(result: dict) -> bool:
    return bool(result.get("ok")) and not result.get("tampered")


def _why(result: dict) -> str:
    if result.get("tampered"):
        return "not measurable: the code touched what measures it (" + "; ".join(result["tampered"]) + ")"
    return result.get("error") or "the run failed"


def step_loop(result: dict) -> tuple[int | None, str | None]:
    """The run's step loop (the one that ran the most iterations in one call) and its steps."""
    loops = ((result.get("attribution") or {}).get("loops")) or []
    best = max(loops, key=lambda loop: loop.get("most_in_one_run") or 0, default=None)
    if not best or not best.get("most_in_one_run"):
        return None, None
    return int(best["most_in_one_run"]), f"{best.get('path')}:{best.get('line')}"


def judge(before: list[dict], after: list[dict], codes: Iterable[str]) -> FixRun:
    codes = sorted(set(codes))
    both = [r for r in before + after if r]
    backend = next((r.get("backend") for r in both if r.get("backend")), None)
    run = FixRun(backend=backend, rows=[], repeats=max(len(before), len(after)), codes=codes)
    run.notes = [UNMEASURED[c] for c in codes if c in UNMEASURED and not any(
        backend in b for _m, _e, b in EXPECTED.get(c, ()))]
    run.runs_before = all(_ok(r) for r in before)
    run.runs_after = all(_ok(r) for r in after)
    if not run.runs_before:
        run.errors["before"] = _why(next(r for r in before if not _ok(r)))
    if not run.runs_after:
        run.errors["after"] = _why(next(r for r in after if not _ok(r)))
    run.steps, run.step_loop = step_loop(before[0]) if before and _ok(before[0]) else (None, None)
    after_steps = step_loop(after[0])[0] if after and _ok(after[0]) else None
    if run.runs_before and run.runs_after and all("stdout" in r for r in before + after):
        run.output_same = all((b.get("stdout") or "") == (a.get("stdout") or "") for b, a in zip(before, after))
        if not run.output_same:
            b_out, a_out = before[0].get("stdout") or "", after[0].get("stdout") or ""
            b_lines, a_lines = b_out.splitlines(), a_out.splitlines()
            run.output_lines = (len(b_lines), len(a_lines))
            if len(b_out) < OUTPUT_KEPT and len(a_out) < OUTPUT_KEPT:
                rest = iter(b_lines)
                run.output_subset = all(any(line == other for other in rest) for line in a_lines)
    wanted = expected(codes)
    for metric in ORDER:
        label, _unit, noise, measurable = METRICS[metric]
        row = Row(metric, label)
        expect, backends = wanted.get(metric, (None, ()))
        row.expect = expect
        b = [r.get(metric) for r in before if _ok(r)]
        a = [r.get(metric) for r in after if _ok(r)]
        if backend is not None and backend not in measurable:
            if expect:
                row.verdict, row.reason = NOT_MEASURABLE, f"not measurable on {backend}"
                run.rows.append(row)
            continue
        if b and None not in b:
            row.before, row.before_runs = statistics.median(b), b
        if a and None not in a:
            row.after, row.after_runs = statistics.median(a), a
        hidden = below_noise(metric, before[0] if before else None, after[0] if after else None) \
            if expect and run.runs_before and run.runs_after else None
        if noise != "rss":
            if run.steps and row.before is not None:
                row.per_step_before = row.before / run.steps
            if after_steps and row.after is not None:
                row.per_step_after = row.after / after_steps
        if expect:
            if backend not in backends:
                row.verdict, row.reason = NOT_MEASURABLE, f"not measurable on {backend}: declared for {', '.join(backends)}"
            elif (row.before is None or row.after is None) and run.runs_before and run.runs_after:
                # Both sides ran and were not tampered with: the runner could not measure this here.
                why = next((r.get("alias_error") for r in before + after if r.get("alias_error")), None)
                row.verdict, row.reason = NOT_MEASURABLE, why or f"{label}: not reported by this run"
            elif row.before is None or row.after is None:
                row.verdict = ERROR
                row.reason = "; ".join(f"{k}: {v}" for k, v in run.errors.items()) or f"{metric} was not measured"
            else:
                margin = threshold(metric, b)
                good = max(a) < min(b) - margin if expect == "decrease" else min(a) > max(b) + margin
                row.verdict = CONFIRMED if good else NOT_CONFIRMED
                if not good and hidden:
                    # A saving the size to expect could not have shown: not measurable, not a miss.
                    row.verdict, row.reason = NOT_MEASURABLE, hidden
                elif not good:
                    spread = f" by more than {margin / MiB:.0f} MiB" if margin else ""
                    row.reason = f"expected every after-run to {expect}{spread}: before {b}, after {a}"
        elif row.before is None and row.after is None:
            continue
        elif metric == "alias_bytes" and not row.before and not row.after:
            continue        # no donation on either side, and none expected: nothing to show
        if metric == "wall_time" and _donates(before) != _donates(after):
            row.reason = WALL_NOT_COMPARABLE
            run.notes.append(f"{label}: {WALL_NOT_COMPARABLE}")
        run.rows.append(row)
    return run


# The probe counts donated bytes by taking every call of a program that donates off JAX's C++ fast
# path (each goes through Python, where the count is made): the side that donates runs slower in the
# measured run than it would alone, so its time is not compared with a side that does not.
WALL_NOT_COMPARABLE = ("not comparable: only one side donates, and counting donated bytes runs each call "
                       "of a donating program through Python in the measured run (JAX's C++ fast path off); "
                       "time both outside jaxmem")


def _donates(results: list[dict]) -> bool:
    return any((r or {}).get("aliased_calls") for r in results)


def measure(run_before: Callable[[], dict], run_after: Callable[[], dict], codes: Iterable[str], *,
            repeats: int = 3, progress: Callable[[str], None] | None = None) -> FixRun:
    """Interleaved runs, before then after: once each, then again up to `repeats` where a noisy
    metric decides; an error is not repeated (it will not go away)."""
    codes = list(codes)
    before: list[dict] = []
    after: list[dict] = []
    total = 1
    i = 0
    while i < total:
        for side, fn, out in (("before", run_before, before), ("after", run_after, after)):
            if progress:
                progress(f"{side} {i + 1}/{total}")
            out.append(fn())
        if i == 0:
            backend = before[0].get("backend") or after[0].get("backend")
            total = max(1, repeats) if needs_repeats(codes, backend, before[0], after[0]) else 1
        if not (_ok(before[-1]) and _ok(after[-1])):
            break
        i += 1
    return judge(before, after, codes)


# ---- the table ---------------------------------------------------------------------------------
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
