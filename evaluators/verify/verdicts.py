"""Judge a pair: for each declared metric, did `after` move the way the card says?

A change counts only if EVERY after-run beats EVERY before-run by the metric's noise threshold,
so one lucky repeat cannot confirm a claim. Reported values are medians of the repeats.
"""
from __future__ import annotations

import statistics

from jaxmem.evaluators.verify.manifest import MetricSpec
from jaxmem.evaluators.verify.metrics import METRICS, threshold
from jaxmem.evaluators.verify.runner import SnippetRun

CONFIRMED = "confirmed"
NOT_CONFIRMED = "not confirmed"
NOT_MEASURABLE = "not measurable here"
ERROR = "error"
VERDICTS = (CONFIRMED, NOT_CONFIRMED, NOT_MEASURABLE, ERROR)


def _median(values: list[float]) -> float:
    return statistics.median(values)


def judge_metric(spec: MetricSpec, before: list[SnippetRun], after: list[SnippetRun],
                 backend: str) -> dict:
    metric = METRICS[spec.metric]
    out = {"metric": spec.metric, "label": metric.label, "unit": metric.unit,
           "expect": spec.expect, "backends": list(spec.backends),
           "before": None, "after": None, "verdict": None, "reason": None}
    if backend not in spec.backends:
        out["verdict"] = NOT_MEASURABLE
        out["reason"] = (f"not measurable on {backend}: declared for {', '.join(spec.backends)}")
        return out
    failed = [r for r in before + after if not r.ok]
    if failed:
        out["verdict"], out["reason"] = ERROR, failed[0].error
        return out
    b = [r.values.get(spec.metric) for r in before]
    a = [r.values.get(spec.metric) for r in after]
    if any(v is None for v in b + a):
        why = next((r.entry_error for r in before + after if r.entry_error), None)
        out["verdict"] = ERROR
        out["reason"] = why or f"{spec.metric} was not measured on {backend}"
        return out
    out["before"], out["after"] = _median(b), _median(a)
    out["before_runs"], out["after_runs"] = b, a
    margin = threshold(metric, b)
    if spec.expect == "decrease":
        confirmed = max(a) < min(b) - margin
    else:
        confirmed = min(a) > max(b) + margin
    out["verdict"] = CONFIRMED if confirmed else NOT_CONFIRMED
    if not confirmed:
        spread = f" by more than {margin / (1 << 20):.0f} MiB" if margin else ""
        out["reason"] = (f"expected every after-run to {spec.expect}{spread}: "
                         f"before {b}, after {a}")
    return out


def overall(metric_verdicts: list[dict]) -> str:
    verdicts = [m["verdict"] for m in metric_verdicts]
    if ERROR in verdicts:
        return ERROR
    measurable = [v for v in verdicts if v != NOT_MEASURABLE]
    if not measurable:
        return NOT_MEASURABLE
    return CONFIRMED if all(v == CONFIRMED for v in measurable) else NOT_CONFIRMED
