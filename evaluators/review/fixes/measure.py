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

The metrics, what each fix should move, the verifier's words and the records (`Row`, `FixRun`)
are in `fix_metrics.py`; the table of a measured fix is drawn by `measure_table.py`.
"""
from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable

from jaxmem.evaluators.review.fixes.fix_metrics import (
    CONFIRMED,
    ERROR,
    EXPECTED,
    METRICS,
    NOT_CONFIRMED,
    NOT_MEASURABLE,
    ORDER,
    OUTPUT_KEPT,
    RSS_NOISE_FLOOR,
    RSS_NOISE_FRACTION,
    UNMEASURED,
    FixRun,
    MiB,
    Row,
    _fmt,
)


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
