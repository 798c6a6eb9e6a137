"""The before/after table of `--fix --run`: the verifier's noise rules and words."""
from __future__ import annotations

from jaxmem.evaluators.review.fixes import fix_metrics, measure, measure_table


def result(**kw) -> dict:
    base = {"ok": True, "tampered": [], "backend": "cpu", "host_syncs": 100, "compile_count": 3,
            "h2d_transfers": 10, "implicit_h2d_transfers": 0, "d2h_transfers": None, "peak_rss": 400 << 20,
            "wall_time": 2.0, "stdout": "x\n"}
    base.update(kw)
    return base


def test_the_noise_rules_and_words_are_the_verifiers():
    from jaxmem.evaluators.verify import metrics, verdicts
    from jaxmem.ingest.schema import METRICS

    assert fix_metrics.RSS_NOISE_FLOOR == metrics.RSS_NOISE_FLOOR
    assert fix_metrics.RSS_NOISE_FRACTION == metrics.RSS_NOISE_FRACTION
    assert (fix_metrics.CONFIRMED, fix_metrics.NOT_CONFIRMED, fix_metrics.NOT_MEASURABLE, fix_metrics.ERROR) == verdicts.VERDICTS
    for name, (label, unit, noise, backends) in fix_metrics.METRICS.items():
        m = METRICS[name]
        assert (m.label, m.unit, m.noise, tuple(m.measurable_on)) == (label, unit, noise, backends), name


def test_counts_decide_on_one_run():
    run = measure.judge([result(host_syncs=200)], [result(host_syncs=1)], ["JM101"])
    syncs = next(r for r in run.rows if r.metric == "host_syncs")
    assert syncs.verdict == "confirmed" and run.verdict == "confirmed"
    d2h = next(r for r in run.rows if r.metric == "d2h_transfers")
    assert d2h.verdict == "not measurable here"              # GPU/TPU only
    assert next(r for r in run.rows if r.metric == "wall_time").verdict == ""   # information only
    assert run.output_same is True


def test_peak_rss_needs_every_run_beyond_the_margin():
    before = [result(peak_rss=(400 + d) << 20) for d in (0, 5, 3)]
    close = [result(peak_rss=(390 + d) << 20) for d in (0, 2, 1)]        # 10 MiB less: noise
    far = [result(peak_rss=(200 + d) << 20) for d in (0, 2, 30)]
    assert measure.needs_repeats(["JM401"], "cpu") and not measure.needs_repeats(["JM101"], "cpu")
    rss = next(r for r in measure.judge(before, close, ["JM401"]).rows if r.metric == "peak_rss")
    assert rss.verdict == "not confirmed" and "20 MiB" in rss.reason
    rss = next(r for r in measure.judge(before, far, ["JM401"]).rows if r.metric == "peak_rss")
    assert rss.verdict == "confirmed" and rss.before == 403 << 20


def test_a_removed_api_fix_is_confirmed_by_the_code_running():
    broken = result(ok=False, error="AttributeError: jax.device_put_sharded is deprecated")
    run = measure.judge([broken], [result()], ["JM204"])
    assert run.verdict == "confirmed" and run.errors["before"].startswith("AttributeError")
    text = measure_table.format_table(run)
    assert "runs" in text and "no (error)" in text


def test_an_after_run_that_fails_is_an_error():
    run = measure.judge([result()], [result(ok=False, error="NameError: x")], ["JM301"])
    assert run.verdict == "error" and "NameError" in measure_table.format_table(run)


def test_tampered_runs_are_not_measurable_numbers():
    run = measure.judge([result()], [result(tampered=["fd 2 replaced"])], ["JM101"])
    assert run.verdict == "error" and "touched what measures it" in run.errors["after"]


def test_per_step_uses_the_step_loop():
    loops = {"loops": [{"path": "t.py", "line": 5, "iterations": 100, "most_in_one_run": 100},
                       {"path": "t.py", "line": 9, "iterations": 300, "most_in_one_run": 3}]}
    run = measure.judge([result(attribution=loops)], [result(host_syncs=1, attribution=loops)], ["JM101"])
    assert run.steps == 100 and run.step_loop == "t.py:5"
    syncs = next(r for r in run.rows if r.metric == "host_syncs")
    assert syncs.per_step_before == 1.0 and syncs.per_step_after == 0.01
    assert "1 -> 0.01" in measure_table.format_table(run)


def test_measure_interleaves_and_stops_on_errors():
    order = []

    def side(name, **kw):
        def run():
            order.append(name)
            return result(**kw)
        return run

    measure.measure(side("b"), side("a", peak_rss=100 << 20), ["JM401"], repeats=3)
    assert order == ["b", "a"] * 3
    order.clear()
    measure.measure(side("b"), side("a", ok=False, error="boom"), ["JM401"], repeats=3)
    assert order == ["b", "a"]


def test_output_compared_line_by_line():
    before = result(stdout="step 0: 1.0\nstep 1: 0.9\nstep 2: 0.8\ndone\n")
    run = measure.judge([before], [result(stdout="step 0: 1.0\ndone\n")], ["JM102"])
    assert run.output_same is False and run.output_subset is True and run.output_lines == (4, 2)
    assert "2 of its 4 lines, in order" in measure_table.format_table(run)
    run = measure.judge([before], [result(stdout="step 0: 1.1\ndone\n")], ["JM102"])
    assert run.output_subset is False and "differs (4 -> 2 lines)" in measure_table.format_table(run)


# ---- a donation fix: did donation take effect, and could peak RSS show it ------------------------
def donation(alias: int, calls: int = 0, largest: int = 0, rss: int = 400, **kw) -> dict:
    return result(alias_bytes=alias, aliased_calls=calls, alias_max_call_bytes=largest, peak_rss=rss << 20, **kw)


def test_donation_on_a_small_state_is_confirmed_by_its_aliased_bytes():
    """jax-kernel-lsq: a 800-byte optimizer state donated 10,000 times. Peak RSS cannot show a
    saving that size (noise margin 20 MiB), so it is not measurable here, not "not confirmed"; the
    aliased bytes go from 0 to 7.6 MiB and decide."""
    loops = {"loops": [{"path": "k.py", "line": 47, "iterations": 10000, "most_in_one_run": 10000}]}
    before = [donation(0, rss=r, attribution=loops) for r in (400, 401, 399)]
    after = [donation(8_000_000, 10_000, 800, rss=r, attribution=loops) for r in (402, 398, 400)]
    run = measure.judge(before, after, ["JM401"])
    rows = {r.metric: r for r in run.rows}
    assert rows["alias_bytes"].verdict == "confirmed" and rows["alias_bytes"].expect == "increase"
    assert rows["alias_bytes"].per_step_after == 800
    assert rows["peak_rss"].verdict == "not measurable here"
    assert "largest call donates 800 B" in rows["peak_rss"].reason and "20.0 MiB" in rows["peak_rss"].reason
    assert run.verdict == "confirmed"
    text = measure_table.format_table(run)
    assert "donated (aliased) bytes" in text and "0 B -> 800 B" in text
    assert "peak RSS: the largest call donates 800 B" in text          # why, under the table
    # Peak RSS cannot decide: one run per side is enough.
    assert not measure.needs_repeats(["JM401"], "cpu", before[0], after[0])
    assert measure.needs_repeats(["JM401"], "cpu")


def test_a_donation_that_did_not_take_effect_is_not_confirmed():
    run = measure.judge([donation(0)], [donation(0)], ["JM401"])
    rows = {r.metric: r for r in run.rows}
    assert rows["alias_bytes"].verdict == "not confirmed" and run.verdict == "not confirmed"
    assert rows["peak_rss"].verdict == "not confirmed"                  # judged: nothing more was donated


def test_a_large_donation_must_show_in_peak_rss_too():
    """The buffer-donation pair's rule: aliased bytes up and peak RSS down, both."""
    big = 256 << 20
    before = [donation(0, rss=r) for r in (1000, 1004, 998)]
    saved = [donation(5 * big, 5, big, rss=r) for r in (740, 745, 742)]
    same = [donation(5 * big, 5, big, rss=r) for r in (1001, 999, 1003)]
    assert measure.needs_repeats(["JM401"], "cpu", before[0], saved[0])
    run = measure.judge(before, saved, ["JM401"])
    assert {r.metric: r.verdict for r in run.rows}["peak_rss"] == "confirmed" and run.verdict == "confirmed"
    run = measure.judge(before, same, ["JM401"])
    verdicts = {r.metric: r.verdict for r in run.rows}
    assert verdicts["alias_bytes"] == "confirmed" and verdicts["peak_rss"] == "not confirmed"
    assert run.verdict == "not confirmed"


def test_aliased_bytes_a_run_does_not_report_are_not_measurable_not_an_error():
    why = "donation cannot be measured with this JAX (AttributeError: x)"
    run = measure.judge([result(peak_rss=400 << 20)], [result(peak_rss=200 << 20, alias_error=why)], ["JM401"])
    rows = {r.metric: r for r in run.rows}
    assert rows["alias_bytes"].verdict == "not measurable here" and rows["alias_bytes"].reason == why
    assert rows["peak_rss"].verdict == "confirmed" and run.verdict == "confirmed"


def test_no_donation_row_for_a_fix_that_is_not_about_donation():
    run = measure.judge([donation(0, host_syncs=200)], [donation(0, host_syncs=1)], ["JM101"])
    assert "alias_bytes" not in {r.metric for r in run.rows} and run.verdict == "confirmed"
    run = measure.judge([donation(0, host_syncs=200)], [donation(4000, 10, 400, host_syncs=1)], ["JM101"])
    alias = next(r for r in run.rows if r.metric == "alias_bytes")
    assert alias.verdict == "" and alias.after == 4000      # shown, for information


def test_measure_runs_a_small_donation_once_per_side():
    order = []

    def side(name, **kw):
        def run():
            order.append(name)
            return donation(**kw)
        return run

    run = measure.measure(side("b", alias=0), side("a", alias=8000, calls=10, largest=800), ["JM401"], repeats=3)
    assert order == ["b", "a"] and run.repeats == 1 and run.verdict == "confirmed"


def test_a_small_donation_whose_peak_rss_drops_anyway_is_repeated_and_confirmed():
    """live-arrays-cleanup: 16 MiB donated per call, yet peak RSS falls by ~140 MiB (buffers that
    lived on without donation): the first runs show it, so the repeats run and confirm it."""
    before = [donation(0, rss=r) for r in (726, 724, 729)]
    after = [donation(320 << 20, 20, 16 << 20, rss=r) for r in (588, 590, 587)]
    assert measure.needs_repeats(["JM401"], "cpu", before[0], after[0])
    run = measure.judge(before, after, ["JM401"])
    assert {r.metric: r.verdict for r in run.rows}["peak_rss"] == "confirmed" and run.verdict == "confirmed"
    # One run each that shows it, but repeats that do not: the small saving is not measurable here.
    noisy = [after[0], donation(320 << 20, 20, 16 << 20, rss=720), after[2]]
    rss = next(r for r in measure.judge(before, noisy, ["JM401"]).rows if r.metric == "peak_rss")
    assert rss.verdict == "not measurable here" and "largest call donates 16.0 MiB" in rss.reason


def test_wall_time_is_not_compared_when_only_one_side_donates():
    # Counting donated bytes takes the donating side off JAX's C++ fast path in the measured run
    # (jax-kernel-lsq: 2.15 s -> 16.9 s measured, not slower outside jaxmem): the time is shown, not compared.
    before = [result(wall_time=2.0, alias_bytes=0, aliased_calls=0)]
    after = [result(wall_time=17.0, alias_bytes=8 << 20, aliased_calls=10_000)]
    run = measure.judge(before, after, ["JM401"])
    wall = next(r for r in run.rows if r.metric == "wall_time")
    assert wall.reason == measure.WALL_NOT_COMPARABLE and wall.verdict == ""
    text = measure_table.format_table(run)
    assert "not comparable" in text and "fast path" in text
    # Both sides donate (or neither): the time is information as before.
    same = measure.judge(after, after, ["JM401"])
    assert next(r for r in same.rows if r.metric == "wall_time").reason is None
    assert "not comparable" not in measure_table.format_table(same)
