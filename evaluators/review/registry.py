"""Every rule, discovered from `evaluators/review/rules/`, and selection by code prefix."""
from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache

from jaxmem.evaluators.review import calibration
from jaxmem.evaluators.review import rules as _rules_pkg
from jaxmem.evaluators.review.rule import Rule


class SelectionError(ValueError):
    """A --select/--ignore entry that matches no rule code."""


@lru_cache(maxsize=1)
def all_rules() -> tuple[Rule, ...]:
    found = []
    for mod in pkgutil.iter_modules(_rules_pkg.__path__):
        if mod.name.startswith("_"):
            continue
        module = importlib.import_module(f"{_rules_pkg.__name__}.{mod.name}")
        rule = getattr(module, "RULE", None)
        if isinstance(rule, Rule):
            found.append(rule)
    return tuple(sorted(found, key=lambda r: r.code))


def measured_rules() -> tuple[Rule, ...]:
    """The codes only a run produces (JM011-JM014, evaluators/review/measured.py): known to
    --list-rules, --explain, --select/--ignore and SARIF, never run by the static pass."""
    from jaxmem.evaluators.review.measured import RULES

    return RULES


def by_code() -> dict[str, Rule]:
    return {r.code: r for r in (*all_rules(), *measured_rules())}


def _check_prefixes(prefixes: list[str], option: str) -> None:
    codes = [r.code for r in (*all_rules(), *measured_rules())]
    for p in prefixes:
        if p == "ALL":
            continue
        if not any(c.startswith(p) for c in codes):
            raise SelectionError(
                f"{option} {p!r} matches no rule; valid codes are {', '.join(codes)} (or a prefix such as JM1, or ALL)"
            )


def select(select: list[str] | None = None, ignore: list[str] | None = None) -> list[Rule]:
    """Rules whose code starts with a selected prefix and with no ignored prefix (ruff-style).
    Without a selection, the default set; a selection (`JM501`, `JM5`, `ALL`) also picks opt-in rules."""
    sel = [s.strip().upper() for s in (select or []) if s.strip()]
    ign = [s.strip().upper() for s in (ignore or []) if s.strip()]
    _check_prefixes(sel, "--select")
    _check_prefixes(ign, "--ignore")
    out = []
    for rule in all_rules():
        if not sel and not rule.default:
            continue
        if sel and "ALL" not in sel and not any(rule.code.startswith(p) for p in sel):
            continue
        if "ALL" in ign or any(rule.code.startswith(p) for p in ign):
            continue
        out.append(rule)
    return out


def select_measured(select: list[str] | None = None, ignore: list[str] | None = None) -> list[Rule]:
    """The measured codes a selection keeps (the same prefixes as `select`; measured codes are on
    by default, and `--ignore JM01` drops them)."""
    sel = [s.strip().upper() for s in (select or []) if s.strip()]
    ign = [s.strip().upper() for s in (ignore or []) if s.strip()]
    return [r for r in measured_rules()
            if (not sel or "ALL" in sel or any(r.code.startswith(p) for p in sel))
            and not ("ALL" in ign or any(r.code.startswith(p) for p in ign))]


def measured_precision() -> dict[str, str]:
    """Each rule's precision on its sure findings in the unseen readings (code nobody here had
    read before it was run): "0.83 (10 of 12)" per code, "_reading" naming the readings, and
    whether the record demotes the rule's findings to possible (calibration.py)."""
    doc = calibration.record()
    demoted = calibration.demoted()
    out = {code: (f"{v['precision']:.2f} ({v['tp']} of {v['tp'] + v['fp']})" if v.get("tp", 0) + v.get("fp", 0)
                  else "no sure findings")
           + (f"; reported as possible (estimate {calibration.estimate(v['tp'], v['fp']):.3f} below the "
              f"{calibration.FLOOR:.2f} floor)" if code in demoted else "")
           for code, v in (doc.get("rules") or {}).items()}
    for r in all_rules():
        if r.record_from and r.code not in out:
            out[r.code] = f"record restarted after a fix: judged again from {r.record_from}"
        if r.earns_sure and not calibration.earned(r.code) and r.code not in demoted:
            t = ((doc.get("rules") or {}).get(r.code) or {}).get("tuned_on") or {}
            tuned = f", {t['tp']} of {t['tp'] + t['fp']} on tuned-on code" if t.get("tp", 0) + t.get("fp", 0) else ""
            out[r.code] = out.get(r.code, "no record yet") + f"{tuned}; reported as possible until it earns sure"
    if doc.get("reading"):
        out["_reading"] = str(doc["reading"])
    return out
