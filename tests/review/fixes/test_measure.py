"""The before/after table of `--fix --run`: the verifier's noise rules and words."""
from __future__ import annotations

from jaxmem.evaluators.review.fixes import measure


def result(**kw) -> dict:
    base = {"ok": True, "tampered": [], "backend": "cpu", "host_syncs": 100, "compile_count": 3,
            "h2d_transfers": 10, "implicit_h2d_transfers": 0, "d2h_transfers": None, "peak_rss": 400 << 20,
            "wall_time": 2.0, "stdout": "x\n"}
    base.update(kw)
    return base


def test_the_noise_rules_and_words_are_the_verifiers():
    from jaxmem.evaluators.verify import metrics, verdicts
    from jaxmem.ingest.schema import METRICS

    assert measure.RSS_NOISE_FLOOR == metrics.RSS_NOISE_FLOOR
    assert measure.RSS_NOISE_FRACTION == metrics.RSS_NOISE_FRACTION
    assert (measure.CONFIRMED, measure.NOT_CONFIRMED, measure.NOT_MEASURABLE, measure.ERROR) == verdicts.VERDICTS
    for name, (label, unit, noise, backends) in measure.METRICS.items():
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
    text = measure.format_table(run)
    assert "runs" in text and "no (error)" in text


def test_an_after_run_that_fails_is_an_error():
    run = measure.judge([result()], [result(ok=False, error="NameError: x")], ["JM301"])
    assert run.verdict == "error" and "NameError" in measure.format_table(run)


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
    assert "1 -> 0.01" in measure.format_table(run)


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
    assert "2 of its 4 lines, in order" in measure.format_table(run)
    run = measure.judge([before], [result(stdout="step 0: 1.1\ndone\n")], ["JM102"])
    assert run.output_subset is False and "differs (4 -> 2 lines)" in measure.format_table(run)
