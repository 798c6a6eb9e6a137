"""Score `jaxmem review` on an unseen reading: precision per confidence tier and rule, recall of the
hand-found cases, and (with --write-precision) the per-rule figures `jaxmem review --list-rules` shows.

    python benchmarks/review/score.py benchmarks/review/unseen-2026-12b            # aggregates
    python benchmarks/review/score.py READING --labels FILE --findings-out FILE.json
    python benchmarks/review/score.py - --write-precision READING...               # evaluators/review/precision.yaml

A reading is a folder of vendored repositories (`<owner>__<name>/`, git-ignored: fetch them again
from SOURCES.txt) with `cases.yaml` (anti-patterns found by hand before the reviewer ran) and, once
its findings were judged, `labels.yaml` (one entry per finding: file, cell, line, code, label TP |
FP | debatable, reason). Each repository is reviewed on its own with the defaults plus
--show-possible, so both tiers are measured. Precision = TP / (TP + FP); debatable findings are
counted apart. A case is found by a finding of a code for its kind in the same file within two
lines (for a missing donation, anywhere in the file: the case names the jit, the finding its call; for a
captured constant, also anywhere in the jitted function, decorators included: the case may name the jit,
the finding names the read). Which codes count for each kind: KIND_CODES; the mapping before the
fifteenth stop (LEGACY_KIND_CODES) is printed beside it, so figures stay comparable across stops.
Unlabelled findings are counted; their locations are printed only with --list-unlabelled (never
for a reading you have not finished reading: that is how a sealed reading stays sealed).
"""
from __future__ import annotations

import argparse
import ast
import functools
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

import yaml

from jaxmem.evaluators.review import api

ROOT = Path(__file__).resolve().parents[2]
# Which codes state each kind of hand-found case. From the fifteenth stop (before 12zzq/12zzr ran):
# the readings' builders use `python-loop-not-scan` for "a Python loop of eager ops that should be
# one jitted step", which is what JM304/JM305/JM307 (an eager optimizer, gradient, model) and JM501
# (an eager `.at[].set` copy per iteration) say; and `host-roundtrip` for per-element reads
# (`vocab[x.item()]` per token, `int(idx[i])` per node), which is what JM101/JM104 say. Before, those
# findings at the case's line did not count (LEGACY_KIND_CODES, printed beside for comparison).
# From the twenty-first stop (before 12zzzk/12zzzl ran): `list-accumulation` also counts JM505 (an
# array grown by `jnp.append`/`concatenate` every iteration is an accumulation across steps, the
# builders' word for 12zzzj's case of it), and `other` counts the new JM506 (a discarded result).
# From the twenty-second stop (before 12zzzo/12zzzp ran): `python-loop-not-scan` also counts JM505;
# builders use the kind for a Python loop that grows an array with `jnp.concatenate` every step
# (12zzzn's two such cases carried JM505 at the case's line), which is what JM505 states. Like
# JM501 (an eager copy per iteration), it is one of the loop's eager operations.
# From the twenty-seventh stop (before 12zzzzzv.. ran): `host-sync-per-step` and `host-roundtrip`
# also count the new JM107 (`jnp.unique(codes)` without `size=` every step reads the values on the
# host to size its result: a host sync, which is what the builders' kinds state).
# From the twenty-eighth stop (before 12zzzzzza.. ran): `python-loop-not-scan` also counts the new
# JM507 (a Python loop that only advances carried state through a jitted step, the builders' case of
# "lax.scan would run it as one program").
# From the twenty-ninth stop (before 12zzzzzzu.. ran): `list-accumulation` also counts the new JM108
# (a list of device values never emptied and handed whole to NumPy or matplotlib every epoch: the
# builders' cases of that kind on 12zzzzzzm and 12zzzzzzr carry it at the case's line).
# From the thirtieth stop (before 12zzzzzzzf.. ran): `jit-in-loop` also counts JM303 (a static
# argument that changes every iteration recompiles every iteration), as it counts JM308 (an argument
# whose shape changes): the builders' kind for "compiles inside the loop" (this set's building
# instructions called it `recompile-per-step`; the cases were renamed before the run).
# From the thirty-first stop (before 12zzzzzzzk.. ran): `other` and `host-sync-per-step` also count
# the new JM607 (`jax_debug_nans` left on for a run: every jitted call's outputs are copied to the
# host and checked), the builders' case of it on eight readings (12k, 12zl, 12zzzzx, 12zzzzzi,
# 12zzzzzt, 12zzzzzzb, 12zzzzzzp, 12zzzzzzzf), filed as `other` (and once as a per-step sync).
# From the thirty-second stop (before 12zzzzzzzzk.. ran): `other` also counts JM604
# (`XLA_PYTHON_CLIENT_ALLOCATOR=platform` for a whole training run: every buffer allocated and
# freed with the platform allocator), the builders' case of it on 12zzzzzzzzj, filed as `other`.
LEGACY_KIND_CODES = {
    "python-loop-not-scan": {"JM503", "JM504"}, "host-roundtrip": {"JM103", "JM105", "JM201", "JM202", "JM013"},
}
KIND_CODES = {
    "missing-donation": {"JM401"}, "host-sync-per-step": {"JM101", "JM102", "JM103", "JM104", "JM105", "JM107", "JM011", "JM607"},
    "timing-no-block": {"JM701", "JM704"}, "device-put-in-loop": {"JM201", "JM202", "JM206", "JM207", "JM012"},
    "host-batch-no-prefetch": {"JM203", "JM201", "JM012"}, "jit-in-loop": {"JM301", "JM303", "JM308", "JM309", "JM014"},
    "xla-env-late": {"JM601"}, "list-accumulation": {"JM803", "JM505", "JM108"},
    "python-loop-not-scan": {"JM503", "JM504", "JM304", "JM305", "JM307", "JM501", "JM505", "JM507"},
    "host-roundtrip": {"JM103", "JM105", "JM201", "JM202", "JM013", "JM101", "JM104", "JM107"}, "captured-constant": {"JM302", "JM306"},
    "callback-per-update": {"JM106"},
    "other": {"JM304", "JM305", "JM307", "JM308", "JM309", "JM501", "JM502", "JM505", "JM506", "JM604", "JM607"},
}


def findings(reading: Path) -> list[dict]:
    out = []
    for repo in sorted(p for p in reading.iterdir() if p.is_dir() and "__" in p.name):
        r = api.review_paths([str(repo)], respect_gitignore=False, jobs=1, progress=False, show_possible=True)
        if r.errors:  # a rule that crashed drops a file's findings: never score that silently
            crashed = [n for n in r.notes if n.message.startswith(api.INTERNAL)]
            print(f"warning: {repo.name}: the reviewer failed on {r.errors} file(s): "
                  f"{crashed[0].path}: {crashed[0].message}", file=sys.stderr)
        for f in r.findings:
            rel = Path(f.path).resolve().relative_to(reading.resolve()).as_posix()
            # `proven`: the model's own verdict, kept apart from the tier shown (a rule whose record
            # on unseen code does not support "sure" shows proven findings as possible), so that
            # its record keeps counting and a rule can earn "sure" back.
            out.append({"file": rel, "cell": f.cell, "line": f.line, "code": f.code, "confidence": f.confidence,
                        "proven": f.proven, "message": f.message, "source_line": f.source_line})
    return out


def load_cases(reading: Path) -> list[dict]:
    doc = yaml.safe_load((reading / "cases.yaml").read_text(encoding="utf-8"))
    return doc["cases"] if isinstance(doc, dict) else doc


@functools.lru_cache(maxsize=256)
def _parsed(path: Path) -> ast.Module | None:
    """A vendored file's tree, parsed once for all the cases and findings that ask about it."""
    try:
        return ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return None


def same_jitted_def(reading: Path, finding: dict, case: dict) -> bool:
    """A captured constant has two ends, like a missing donation: the jitted def (its decorator
    or `def` line, where a case often names it) and the read inside it (where the finding is). The
    case matches a finding inside the same function, decorators included (`.py` files only)."""
    if finding["cell"] is not None:
        return False
    tree = _parsed(reading / finding["file"])
    if tree is None:
        return False
    best = None
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.lineno <= finding["line"] <= n.end_lineno:
            if best is None or n.lineno > best.lineno:
                best = n
    if best is None:
        return False
    first = min([best.lineno, *(d.lineno for d in best.decorator_list)])
    return first <= case["line"] <= best.end_lineno


def score(reading: Path, labels_path: Path | None) -> dict:
    found = findings(reading)
    # Several findings of one rule on one line (`jit(grad(jit(f)))`) are labelled one by one, in
    # the order the reviewer reports them: each takes the next label of its line (the last label
    # again if the reviewer now reports more of them than were judged).
    labels: dict[tuple, list[str]] = defaultdict(list)
    if labels_path is not None and labels_path.exists():
        for x in yaml.safe_load(labels_path.read_text(encoding="utf-8")) or []:
            labels[(x["file"], x.get("cell"), x["line"], x["code"])].append(x["label"])
    taken: Counter = Counter()
    tiers: dict[str, Counter] = defaultdict(Counter)
    rules: dict[str, dict[str, Counter]] = defaultdict(lambda: defaultdict(Counter))
    unlabelled = []
    for f in found:
        key = (f["file"], f["cell"], f["line"], f["code"])
        queue = labels.get(key) or [None]
        label = queue[min(taken[key], len(queue) - 1)]
        taken[key] += 1
        f["label"] = label
        if label is None:
            unlabelled.append(f)
        tiers[f["confidence"]][label or "unlabelled"] += 1
        rules[f["confidence"]][f["code"]][label or "unlabelled"] += 1
    cases = load_cases(reading)
    recall: dict[str, Counter] = {"sure": Counter(), "sure+possible": Counter(), "sure+possible, legacy kinds": Counter()}
    by_kind: Counter = Counter()
    by_kind_found: Counter = Counter()
    for c in cases:
        cell = None if c.get("cell") is None else c["cell"] + 1
        severity = c.get("confidence") or c.get("severity")
        for name, allowed, mapping in (("sure", {"sure"}, KIND_CODES), ("sure+possible", {"sure", "possible"}, KIND_CODES),
                                       ("sure+possible, legacy kinds", {"sure", "possible"},
                                        {**KIND_CODES, **LEGACY_KIND_CODES})):
            codes = mapping.get(c["kind"], set())
            hit = any(f["file"] == c["file"] and f["code"] in codes and f["confidence"] in allowed
                      and (c["kind"] == "missing-donation" or (f["cell"] == cell and abs(f["line"] - c["line"]) <= 2)
                           or (c["kind"] == "captured-constant" and same_jitted_def(reading, f, c)))
                      for f in found)
            recall[name][(severity, hit)] += 1
            if name == "sure+possible" and severity == "clear":
                by_kind[c["kind"]] += 1
                by_kind_found[c["kind"]] += hit
    return {"findings": found, "tiers": tiers, "rules": rules, "unlabelled": unlabelled, "recall": recall,
            "by_kind": {k: (by_kind_found[k], n) for k, n in by_kind.items()}}


def precision(c: Counter) -> str:
    n = c["TP"] + c["FP"]
    return f"{c['TP'] / n:.2f}" if n else "-"


def render(reading: Path, s: dict) -> str:
    out = [f"jaxmem review on {reading.name}: {len(s['findings'])} findings (both tiers)", ""]
    for tier in ("sure", "possible"):
        c = s["tiers"].get(tier, Counter())
        out.append(f"{tier:<9} TP {c['TP']:>3}  FP {c['FP']:>3}  debatable {c['debatable']:>3}  unlabelled "
                   f"{c['unlabelled']:>3}  precision {precision(c)}")
        for code, rc in sorted(s["rules"].get(tier, {}).items()):
            out.append(f"    {code}: TP {rc['TP']}, FP {rc['FP']}, debatable {rc['debatable']}"
                       + (f", unlabelled {rc['unlabelled']}" if rc["unlabelled"] else ""))
    out.append("")
    for name, c in s["recall"].items():
        parts = []
        for severity in ("clear", "debatable"):
            n = c[(severity, True)] + c[(severity, False)]
            parts.append(f"{severity} {c[(severity, True)]}/{n}")
        out.append(f"recall ({name}): " + ", ".join(parts))
    out.append("clear cases found by kind (sure+possible): "
               + ", ".join(f"{k} {f}/{n}" for k, (f, n) in sorted(s["by_kind"].items())))
    return "\n".join(out) + "\n"


def write_precision(readings: list[Path]) -> Path:
    """Per rule, the proven findings of each reading's first run (labels-first-reading.yaml, judged
    before anyone tuned on that reading), summed over the readings: those the model proved, shown
    as sure or, for a rule its record had demoted, as possible (`proven`; readings judged before
    that field existed say only what was shown, `confidence`)."""
    from jaxmem.evaluators.review import parse_errors, registry

    starts = {r.code: r.record_from for r in registry.all_rules() if r.record_from}
    starts[parse_errors.PARSE_ERROR_CODE] = parse_errors.PARSE_ERROR_RECORD_FROM  # not a Rule: its restart lives there
    totals: dict[str, Counter] = defaultdict(Counter)
    names = []
    for reading in readings:
        first = reading / "labels-first-reading.yaml"
        if not first.is_file():
            raise SystemExit(f"{reading}: no labels-first-reading.yaml (the judged first run)")
        names.append(reading.name)
        for x in yaml.safe_load(first.read_text(encoding="utf-8")) or []:
            if reading.name < starts.get(x["code"], ""):
                continue  # judged the rule before the change its record restarts from
            if x.get("proven", x.get("confidence", "sure") == "sure"):
                totals[x["code"]][x["label"]] += 1
    rules = {}
    for code, c in sorted(totals.items()):
        n = c["TP"] + c["FP"]
        rules[code] = {"tp": c["TP"], "fp": c["FP"], "debatable": c["debatable"],
                       "precision": round(c["TP"] / n, 2) if n else None}
    # A rule that must earn "sure" (Rule.earns_sure) is promoted only if the tuned-on benchmark's
    # hand labels of its findings do not say otherwise (calibration.earned): kept beside the record.
    earning = {r.code for r in registry.all_rules() if r.earns_sure}
    for code, c in sorted(tuned_on_labels(earning).items()):
        rules.setdefault(code, {"tp": 0, "fp": 0, "debatable": 0, "precision": None})
        rules[code]["tuned_on"] = {"tp": c["TP"], "fp": c["FP"], "debatable": c["debatable"]}
    tp, fp = sum(c["TP"] for c in totals.values()), sum(c["FP"] for c in totals.values())
    restarted = "; records restarted: " + ", ".join(f"{c} from {r}" for c, r in sorted(starts.items())) if starts else ""
    doc = {"reading": f"proven findings on the first run over {', '.join(names)} (code nobody here had read "
                      f"before it was run; TP {tp}, FP {fp}; benchmarks/review/score.py{restarted})", "rules": rules}
    path = ROOT / "evaluators" / "review" / "precision.yaml"
    path.write_text("# Written by benchmarks/review/score.py --write-precision; read by --list-rules.\n"
                    + yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


def tuned_on_labels(codes: set[str]) -> dict[str, Counter]:
    """Per code, the hand labels (benchmarks/review/realcode/labels.yaml) of the findings these rules
    make now on the tuned-on real-code benchmark, both tiers."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("realcode_run", ROOT / "benchmarks" / "review" / "realcode" / "run.py")
    rc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rc)
    labels = {rc.key(x["path"], x.get("cell"), x["line"], x["code"]): x["label"]
              for x in rc.load_items(rc.HERE / "labels.yaml") if x["code"] in codes}
    out: dict[str, Counter] = defaultdict(Counter)
    for repo in rc.repos():
        for f in rc.review([str(repo)], jobs=1).findings:
            if f.code in codes:
                rel = Path(f.path).resolve().relative_to(rc.HERE).as_posix()
                out[f.code][labels.get(rc.key(rel, f.cell, f.line, f.code), "unlabelled")] += 1
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("reading", type=Path)
    ap.add_argument("--labels", type=Path, help="labels file (default: READING/labels.yaml)")
    ap.add_argument("--findings-out", type=Path, help="write the findings (for labelling) to this JSON file")
    ap.add_argument("--list-unlabelled", action="store_true", help="print unlabelled findings' locations")
    ap.add_argument("--write-precision", nargs="+", type=Path, metavar="READING",
                    help="write evaluators/review/precision.yaml from these readings' judged first runs, and exit")
    args = ap.parse_args(argv)
    if args.write_precision:
        print(f"wrote {write_precision(args.write_precision)}")
        return 0
    if not (args.reading / "cases.yaml").is_file():
        ap.error(f"{args.reading}: not a reading (no cases.yaml)")
    if not any(p.is_dir() and "__" in p.name for p in args.reading.iterdir()):
        ap.error(f"{args.reading}: the vendored code is missing; fetch it again as its README says")
    s = score(args.reading, args.labels or args.reading / "labels.yaml")
    if args.findings_out:
        args.findings_out.write_text(json.dumps(s["findings"], indent=1), encoding="utf-8")
    sys.stdout.write(render(args.reading, s))
    if args.list_unlabelled:
        for f in s["unlabelled"]:
            where = f["file"] + (f":cell {f['cell']}" if f["cell"] else "") + f":{f['line']}"
            print(f"  unlabelled {f['confidence']} {f['code']} {where}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
