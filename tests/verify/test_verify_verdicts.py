"""Verdict rules on hand-made runs: exact metrics, the RSS noise margin, labels and errors."""
from __future__ import annotations

from jaxmem.evaluators.verify.manifest import MetricSpec
from jaxmem.evaluators.verify.runner import SnippetRun
from jaxmem.evaluators.verify.verdicts import CONFIRMED, ERROR, NOT_CONFIRMED, NOT_MEASURABLE, judge_metric, overall

MiB = 1 << 20


def runs(metric, *values):
    return [SnippetRun(values={metric: v}, device={"backend": "cpu"}) for v in values]


def spec(metric, expect="decrease", backends=("cpu", "gpu", "tpu")):
    return MetricSpec(metric=metric, expect=expect, backends=backends)


def test_exact_decrease_is_confirmed_and_reports_medians():
    m = judge_metric(spec("h2d_transfers"), runs("h2d_transfers", 101), runs("h2d_transfers", 1), "cpu")
    assert (m["verdict"], m["before"], m["after"]) == (CONFIRMED, 101, 1)


def test_no_change_is_not_confirmed_with_a_reason():
    m = judge_metric(spec("host_syncs"), runs("host_syncs", 3), runs("host_syncs", 3), "cpu")
    assert m["verdict"] == NOT_CONFIRMED
    assert "decrease" in m["reason"]


def test_increase_expectation():
    m = judge_metric(spec("alias_bytes", "increase"), runs("alias_bytes", 0), runs("alias_bytes", 4096), "cpu")
    assert m["verdict"] == CONFIRMED


def test_rss_change_inside_the_noise_margin_is_not_confirmed():
    before = runs("peak_rss", 600 * MiB, 601 * MiB, 600 * MiB)
    after = runs("peak_rss", 590 * MiB, 589 * MiB, 591 * MiB)   # 10 MiB < max(20 MiB, 5%)
    assert judge_metric(spec("peak_rss"), before, after, "cpu")["verdict"] == NOT_CONFIRMED


def test_rss_must_drop_beyond_the_margin_in_every_repeat():
    before = runs("peak_rss", 600 * MiB, 600 * MiB, 600 * MiB)
    good = runs("peak_rss", 400 * MiB, 401 * MiB, 402 * MiB)
    one_bad = runs("peak_rss", 400 * MiB, 590 * MiB, 402 * MiB)
    assert judge_metric(spec("peak_rss"), before, good, "cpu")["verdict"] == CONFIRMED
    assert judge_metric(spec("peak_rss"), before, one_bad, "cpu")["verdict"] == NOT_CONFIRMED


def test_metric_not_declared_for_this_backend_is_labelled_not_measured():
    m = judge_metric(spec("device_peak_bytes", backends=("gpu", "tpu")),
                     runs("device_peak_bytes", None), runs("device_peak_bytes", None), "cpu")
    assert m["verdict"] == NOT_MEASURABLE
    assert m["reason"].startswith("not measurable on cpu")
    assert m["before"] is None and m["after"] is None


def test_failed_run_is_an_error_with_its_reason():
    bad = [SnippetRun(values={}, device={}, error="timed out after 60 s")]
    m = judge_metric(spec("host_syncs"), bad, runs("host_syncs", 1), "cpu")
    assert (m["verdict"], m["reason"]) == (ERROR, "timed out after 60 s")


def test_missing_value_is_an_error_naming_the_entry_problem():
    before = [SnippetRun(values={"temp_bytes": None}, device={}, entry_error="LookupError: no grad_fn")]
    m = judge_metric(spec("temp_bytes"), before, runs("temp_bytes", 1), "cpu")
    assert (m["verdict"], m["reason"]) == (ERROR, "LookupError: no grad_fn")


def test_overall_verdict():
    c, n, x, e = ({"verdict": v} for v in (CONFIRMED, NOT_MEASURABLE, NOT_CONFIRMED, ERROR))
    assert overall([c, n]) == CONFIRMED
    assert overall([n, n]) == NOT_MEASURABLE
    assert overall([c, x, n]) == NOT_CONFIRMED
    assert overall([c, e]) == ERROR
