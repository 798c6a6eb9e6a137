"""Verify one snippet pair: repeated, interleaved before/after runs, judged and recorded."""
from __future__ import annotations

import platform
import statistics
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from jaxmem.evaluators.verify.manifest import Pair
from jaxmem.evaluators.verify.metrics import METRICS
from jaxmem.evaluators.verify.runner import SnippetRun, run_baseline, run_snippet
from jaxmem.evaluators.verify.sandbox import Limits
from jaxmem.evaluators.verify.store import cache_key
from jaxmem.evaluators.verify.verdicts import judge_metric, overall


@dataclass(frozen=True)
class Step:
    """One child run about to start: the verifier's progress, for bars and logs."""

    pair: str
    side: str       # "baseline", "before", "after"
    run: int        # 1-based
    runs: int       # runs of this side in all (exact metrics need one, noisy ones `repeats`)

    @property
    def done(self) -> int:
        """Child runs finished before this one, of the pair's 2 x runs."""
        return 2 * (self.run - 1) + (self.side == "after")

    @property
    def total(self) -> int:
        return 2 * self.runs

    def __str__(self) -> str:
        return f"{self.pair}: {self.side} {self.run}/{self.runs}"


Progress = Callable[[Step], None]


class Baselines:
    """Empty-snippet runs, one per distinct manifest env (XLA_FLAGS can change the floor)."""

    def __init__(self, limits: Limits):
        self.limits = limits
        self._runs: dict[tuple, SnippetRun] = {}
        self._lock = threading.Lock()

    def get(self, env: dict[str, str], isolation: str | None = None) -> SnippetRun:
        key = (tuple(sorted(env.items())), isolation)
        with self._lock:       # workers of `verify_topics(jobs=N)` share one floor per env
            if key not in self._runs:
                self._runs[key] = run_baseline(env, self.limits, isolation)
            return self._runs[key]


def sync_lines(run: SnippetRun) -> list[dict]:
    """Host sync points grouped by source line, in line order."""
    counts = Counter((s.get("line"), s.get("source")) for s in run.syncs)
    return [{"line": line, "source": source, "count": n}
            for (line, source), n in sorted(counts.items(), key=lambda kv: (kv[0][0] or 0))]


def needs_repeats(pair: Pair, backend: str | None) -> bool:
    """Only noisy metrics need repeats: counts and compiled sizes repeat exactly across
    processes (101/101/101 in the measurement notes), so one run per side decides them."""
    return any(METRICS[s.metric].noise != "exact" for s in pair.metrics if backend in s.backends)


def device_of(runs: list[SnippetRun]) -> dict:
    return next((r.device for r in runs if r.device), {})


def verify_pair(pair: Pair, *, repeats: int, limits: Limits, baselines: Baselines,
                progress: Progress | None = None, isolation: str | None = None) -> dict:
    baseline = baselines.get(pair.env, isolation)
    if not baseline.ok:
        raise RuntimeError(f"the empty-snippet baseline failed, so nothing can be measured: {baseline.error}")
    before: list[SnippetRun] = []
    after: list[SnippetRun] = []
    here = baseline.device.get("backend")
    # Nothing declared is measurable on this backend: running the pair would prove nothing.
    n_runs = 0 if not any(here in s.backends for s in pair.metrics) \
        else repeats if needs_repeats(pair, here) else 1
    # Interleaved so that drift in the machine's state hits both sides alike.
    for i in range(n_runs):
        for side, path, side_runs in (("before", pair.before, before), ("after", pair.after, after)):
            if progress:
                progress(Step(pair.id, side, i + 1, n_runs))
            side_runs.append(run_snippet(path, entry=pair.entry, env=pair.env, limits=limits,
                                         baseline=baseline, isolation=isolation))
        if not (before[-1].ok and after[-1].ok):
            break   # an error will not go away on a repeat; do not spend the time
    device = device_of(before + after) or baseline.device
    backend = device.get("backend", "unknown")
    metrics = [judge_metric(spec, before, after, backend) for spec in pair.metrics]
    errors = [{"side": side, "error": r.error, "traceback": r.traceback, "stderr": r.stderr[-2000:]}
              for side, runs in (("before", before), ("after", after)) for r in runs[:1] if not r.ok]
    snippet_hash = pair.snippet_hash()
    return {
        "topic": pair.topic, "pair": pair.id, "title": pair.title, "snippet_hash": snippet_hash,
        "key": cache_key(snippet_hash, device.get("jax", "?"), device.get("jaxlib", "?"),
                         backend, device.get("device_kind", "?")),
        "jax": device.get("jax"), "jaxlib": device.get("jaxlib"), "backend": backend,
        "device_kind": device.get("device_kind"), "device_count": device.get("device_count"),
        "python": platform.python_version(),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "repeats": len(before), "verdict": overall(metrics), "metrics": metrics,
        "isolation": isolation or (before[0].isolation if before else None), "node": platform.node(),
        "info": _info(before, after), "errors": errors,
        "host_sync_lines": {"before": sync_lines(before[0]) if before and before[0].ok else [],
                            "after": sync_lines(after[0]) if after and after[0].ok else []},
    }


def _info(before: list[SnippetRun], after: list[SnippetRun]) -> dict:
    """Every measured metric (declared or not), medians: context for readers, not verdicts."""
    info = {}
    for name in METRICS:
        b = [r.values.get(name) for r in before if r.ok]
        a = [r.values.get(name) for r in after if r.ok]
        if b and a and None not in b + a:
            info[name] = {"before": statistics.median(b), "after": statistics.median(a)}
    return info
