"""A rule's "sure" findings are shown as sure only where they have held on unseen code.

The semantic model marks a finding sure when it proved the rule's premises (a device array, read
every step of a training loop). Proven premises are not the same as a real cost: on code nobody
here had read before the run, some rules' proven findings were mostly wrong or debatable (a
donation that saves a few kilobytes, double precision a simulation wants). precision.yaml holds
each rule's measured record on those readings (benchmarks/review/score.py --write-precision).
A rule whose record does not support "sure" has its findings reported as possible, with the
record in the message, so the default output, the exit status, SARIF and the pre-commit hook show
only what has held.

The test is Laplace's rule of succession against the issue's target: the estimated precision
(tp + 1) / (tp + fp + 2) must reach 0.80. Fewer than MIN_JUDGED judged findings are too little
evidence to overrule the model, so such a rule keeps its verdict; 3 right of 3 passes, 0 of 4 or
13 of 21 does not. A rule that joined the default set before any reading judged it
(Rule.earns_sure) works the other way round: possible until its record passes the same test.
"""
from __future__ import annotations

from functools import lru_cache

FLOOR = 0.80
MIN_JUDGED = 3


@lru_cache(maxsize=1)
def record() -> dict:
    """precision.yaml as written by the benchmark: {"reading": str, "rules": {code: {tp, fp, ...}}}."""
    from importlib.resources import files

    import yaml

    try:
        doc = yaml.safe_load(files("jaxmem.evaluators.review").joinpath("precision.yaml").read_text(encoding="utf-8"))
    except (FileNotFoundError, OSError):
        return {}
    return doc if isinstance(doc, dict) else {}


def estimate(tp: int, fp: int) -> float:
    return (tp + 1) / (tp + fp + 2)


def holds(counts: dict | None) -> bool | None:
    """Whether a record ({"tp", "fp"}) supports "sure": None with fewer than MIN_JUDGED judged."""
    tp, fp = int((counts or {}).get("tp", 0)), int((counts or {}).get("fp", 0))
    return None if tp + fp < MIN_JUDGED else estimate(tp, fp) >= FLOOR


@lru_cache(maxsize=1)
def demoted() -> dict[str, str]:
    """Codes whose sure findings are reported as possible -> the record that says why."""
    return {code: f"right in {v.get('tp', 0)} of {v.get('tp', 0) + v.get('fp', 0)} on unseen code"
            for code, v in (record().get("rules") or {}).items() if holds(v) is False}


def earned(code: str) -> bool:
    """The rule's record on unseen code supports "sure": enough judged findings, estimate at the
    floor (for rules that must earn it, Rule.earns_sure). Promotion changes what the default output
    shows everywhere, so judged evidence against the rule on the tuned-on benchmark (`tuned_on`:
    its findings there, labelled by hand) blocks it as well: a record under the floor, or, with
    fewer than MIN_JUDGED judged there, more of them wrong than right (0 right of 2 is no support)."""
    v = (record().get("rules") or {}).get(code) or {}
    tuned = v.get("tuned_on") or {}
    against = holds(tuned) is False or int(tuned.get("fp", 0)) > int(tuned.get("tp", 0))
    return holds(v) is True and not against
