"""Real-code benchmark for `jaxmem review`: precision, recall and throughput on vendored JAX code.

    python benchmarks/review/realcode/run.py              # tables
    python benchmarks/review/realcode/run.py --json       # the same as JSON
    python benchmarks/review/realcode/run.py --split dev  # development repositories only

Each vendored repository (realcode/<owner>__<repo>/) is reviewed on its own, with the defaults a
user gets from `jaxmem review <dir>`. Every finding is matched to the hand labels in labels.yaml
(path, cell, line, code); recall.yaml lists real anti-patterns found by reading the code. Both
files hold one mapping per `- ` item, one `key: value` per line, values written as JSON.

Two repositories are held out against overfitting the reviewer to the code it is tuned on: by a
fixed rule, the two with the fewest `vendored_bytes` in manifest.yaml. `--split dev` shows only
the others (per rule, recall, unlabeled findings); the default also prints held-out rows.

Later held-out parts, "held-out N", hold the repositories whose manifest entry says
`split: "heldoutN"`: each added after a round of rule work and labelled once, unseen, on the
reviewer of that day. Once a rule change is judged against one, its row is no longer an unbiased
estimate; SPLIT_NOTES below says which are still unseen and where each unseen reading is kept.
They take no part in the smallest-two rule, and `--split dev` leaves them out.
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

from jaxmem.evaluators.review import api, config

HERE = Path(__file__).resolve().parent
LABELS = ("TP", "FP", "debatable")
RECALL_SLACK = 2  # a recall case is found by a finding with one of its codes within +-2 lines
_TEST_NAME = re.compile(r"^(test_.*\.py|.*_test\.py|conftest\.py)$")


def load_items(path: Path) -> list[dict]:
    """The small YAML subset labels.yaml and recall.yaml are written in."""
    items: list[dict] = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        if raw.startswith("- "):
            items.append({})
            raw = raw[2:]
        key, _, value = raw.strip().partition(": ")
        items[-1][key] = json.loads(value)
    return items


def repos() -> list[Path]:
    return sorted(p for p in HERE.iterdir() if p.is_dir() and "__" in p.name)


HELD_OUT_COUNT = 2


# Later unseen sets are marked in manifest.yaml with `split: "heldoutN"` and reported as
# "held-out N" rows. Each was labelled once, on the reviewer as it stood when it was added; once a
# rule change is judged against one it is development code too (see README.md), and its note
# says where its unseen reading is kept.
SPLIT_NOTES = {
    "held-out 2": "used in development since round 2 (its unseen round-1 reading is in baseline-round1.txt)",
    "held-out 3": "used in development since round 3 (its unseen reading is in baseline-heldout3.txt)",
    "held-out 4": "used in development since round 5 (its unseen reading is in baseline-heldout4.txt)",
    "held-out 5": "used in development since round 6 (its unseen reading is in baseline-heldout5.txt)",
}


def _manifest_entries() -> dict[str, dict]:
    """Per repository folder (`dir`): its vendored_bytes and its `split` field, if any."""
    entries: dict[str, dict] = {}
    current = None
    for raw in (HERE / "manifest.yaml").read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if line.startswith("dir:"):
            current = json.loads(line.partition(": ")[2])
            entries[current] = {}
        elif line.startswith("vendored_bytes:") and current is not None:
            entries[current]["bytes"] = int(line.partition(": ")[2])
        elif line.startswith("split:") and current is not None:
            entries[current]["split"] = json.loads(line.partition(": ")[2])
    return entries


def held_out() -> frozenset[str]:
    """Folder names of the held-out repositories: the two smallest by vendored_bytes among those
    without a `split` field (the later held-out sets are apart)."""
    sizes = {d: e["bytes"] for d, e in _manifest_entries().items() if "split" not in e and "bytes" in e}
    return frozenset(sorted(sizes, key=lambda d: (sizes[d], d))[:HELD_OUT_COUNT])


def named_splits() -> dict[str, str]:
    """Folder name -> "held-out N" for the repositories marked `split: "heldoutN"`."""
    out = {}
    for d, e in _manifest_entries().items():
        m = re.fullmatch(r"heldout(\d+)", e.get("split", ""))
        if m:
            out[d] = f"held-out {m.group(1)}"
    return out


def split_names(named: dict[str, str]) -> list[str]:
    return ["dev", "held-out", *sorted(set(named.values()), key=lambda n: int(n.split()[-1]))]


def split_of(rel: str, held: frozenset[str], named: dict[str, str] | None = None) -> str:
    top = rel.split("/", 1)[0]
    if named and top in named:
        return named[top]
    return "held-out" if top in held else "dev"


def is_test(rel: str) -> bool:
    parts = rel.split("/")
    return any(p in ("tests", "test") for p in parts[:-1]) or bool(_TEST_NAME.match(parts[-1]))


def review(paths: list[str], jobs: int | None = None) -> api.ReviewResult:
    """What `jaxmem review PATHS --show-possible` runs: the nearest pyproject's [tool.jaxmem],
    else defaults; both confidence tiers, so each is labelled and measured (the default output
    is the sure tier)."""
    cfg = config.load(config.find_pyproject(Path(paths[0])))
    return api.review_paths(paths, select=cfg.select, ignore=cfg.ignore, exclude=cfg.exclude,
                            max_file_size=cfg.max_file_size, jobs=jobs, progress=False,
                            include_tests=cfg.include_tests, show_possible=True)


def key(rel: str, cell, line: int, code: str) -> tuple:
    return (rel, cell, line, code)


def precision(counts: Counter) -> float | None:
    judged = counts["TP"] + counts["FP"]
    return round(counts["TP"] / judged, 3) if judged else None


def run(repeats: int = 3, jobs: int = 2, split: str = "all") -> dict:
    """`split`: "all" (every repository, with dev and held-out summary rows) or "dev"."""
    held, named = held_out(), named_splits()
    keep = (lambda rel: True) if split == "all" else (lambda rel: split_of(rel, held, named) == split)
    labels = {key(x["path"], x.get("cell"), x["line"], x["code"]): x
              for x in load_items(HERE / "labels.yaml") if keep(x["path"])}
    cases = [c for c in load_items(HERE / "recall.yaml") if keep(c["path"])]
    findings, files = [], 0
    for repo in repos():
        if not keep(repo.name + "/"):
            continue
        result = review([str(repo)], jobs=jobs)
        files += result.files
        for f in result.findings:
            rel = Path(f.path).resolve().relative_to(HERE).as_posix()
            findings.append((rel, f))

    # Precision: per rule and overall, split into non-test and test files.
    table: dict[str, dict[str, Counter]] = defaultdict(lambda: {"non-test": Counter(), "test": Counter()})
    by_split: dict[str, dict[str, Counter]] = defaultdict(lambda: {"non-test": Counter(), "test": Counter()})
    by_tier: dict[str, Counter] = {"sure": Counter(), "possible": Counter()}  # non-test findings
    tier_rules: dict[str, dict[str, Counter]] = {"sure": defaultdict(Counter), "possible": defaultdict(Counter)}
    unlabeled, seen = [], set()
    for rel, f in findings:
        k = key(rel, f.cell, f.line, f.code)
        seen.add(k)
        label = labels.get(k)
        where = "test" if is_test(rel) else "non-test"
        if label is None:
            unlabeled.append({"path": rel, "cell": f.cell, "line": f.line, "code": f.code, "message": f.message,
                              "confidence": f.confidence})
            by_split[split_of(rel, held, named)][where]["unlabeled"] += 1
            continue
        table[f.code][where][label["label"]] += 1
        by_split[split_of(rel, held, named)][where][label["label"]] += 1
        if where == "non-test":
            by_tier[f.confidence][label["label"]] += 1
            tier_rules[f.confidence][f.code][label["label"]] += 1
    stale = [{"path": k[0], "cell": k[1], "line": k[2], "code": k[3]} for k in labels if k not in seen]
    rows = []
    totals = {"non-test": Counter(), "test": Counter()}
    for code in sorted(table):
        row = {"code": code}
        for part, counts in table[code].items():
            totals[part].update(counts)
            row[part] = {**{lab: counts[lab] for lab in LABELS}, "precision": precision(counts)}
        rows.append(row)
    overall = {part: {**{lab: c[lab] for lab in LABELS}, "precision": precision(c)} for part, c in totals.items()}
    both = totals["non-test"] + totals["test"]
    overall["all"] = {**{lab: both[lab] for lab in LABELS}, "precision": precision(both)}

    # Recall over the hand-found cases.
    by_place = defaultdict(list)
    for rel, f in findings:
        by_place[(rel, f.cell)].append(f)
    recall_rows = []
    for c in cases:
        hits = [f for f in by_place[(c["path"], c.get("cell"))]
                if f.code in c["codes"] and abs(f.line - c["line"]) <= RECALL_SLACK]
        recall_rows.append({"id": c["id"], "path": c["path"], "cell": c.get("cell"), "line": c["line"],
                            "codes": c["codes"], "found": bool(hits)})
    found = sum(r["found"] for r in recall_rows)
    splits = {}
    for name in split_names(named) if split == "all" else (split,):
        rows_here = [r for r in recall_rows if split_of(r["path"], held, named) == name]
        nt, te = by_split[name]["non-test"], by_split[name]["test"]
        splits[name] = {
            "repos": sorted(p.name for p in repos() if split_of(p.name + "/", held, named) == name),
            "non-test": {**{lab: nt[lab] for lab in LABELS}, "precision": precision(nt), "unlabeled": nt["unlabeled"]},
            "test_findings": sum(te.values()),
            "recall": {"found": sum(r["found"] for r in rows_here), "cases": len(rows_here)},
        }

    # Throughput: every vendored file in one batch with `jobs` worker processes.
    all_paths = [str(p) for p in repos() if keep(p.name + "/")]
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        batch = review(all_paths, jobs=jobs)
        times.append(time.perf_counter() - t0)
    median = statistics.median(times)

    return {
        "repos": [p.name for p in repos() if keep(p.name + "/")], "files": files, "findings": len(findings),
        "split": split, "held_out": sorted(held), "splits": splits,
        "by_rule": rows, "overall": overall,
        "tiers": {t: {**{lab: c[lab] for lab in LABELS}, "precision": precision(c),
                      "by_rule": {code: {**{lab: rc[lab] for lab in LABELS}, "precision": precision(rc)}
                                  for code, rc in sorted(tier_rules[t].items())}}
                  for t, c in by_tier.items()},
        "recall": {"found": found, "cases": len(recall_rows),
                   "recall": round(found / len(recall_rows), 3) if recall_rows else None, "rows": recall_rows},
        "unlabeled": unlabeled, "stale_labels": stale,
        "throughput": {"files": batch.files, "jobs": jobs, "runs_s": [round(t, 3) for t in times],
                       "median_s": round(median, 3), "files_per_s": round(batch.files / median, 1)},
    }


def _fmt(cell: dict) -> str:
    p = "-" if cell["precision"] is None else f"{cell['precision']:.2f}"
    return f"{cell['TP']:>3} {cell['FP']:>3} {cell['debatable']:>3} {p:>5}"


def render(r: dict) -> str:
    empty = {"TP": 0, "FP": 0, "debatable": 0, "precision": None}
    cols = f"{'TP':>3} {'FP':>3} {'deb':>3} {'prec':>5}"
    head = f"{'code':<6}| non-test {cols} | test {cols} | all {cols}"
    out = [f"jaxmem review on {len(r['repos'])} vendored repositories: {r['files']} files, {r['findings']} findings",
           "", "Precision = TP/(TP+FP); debatable findings are counted apart, outside precision.", "",
           head, "-" * len(head)]

    def line(name: str, splits: dict) -> str:
        nt, te = splits.get("non-test", empty), splits.get("test", empty)
        al = {k: nt[k] + te[k] for k in LABELS}
        al["precision"] = precision(Counter(al))
        return f"{name:<6}|          {_fmt(nt)} |      {_fmt(te)} |     {_fmt(al)}"

    for row in r["by_rule"]:
        out.append(line(row["code"], row))
    out.append("-" * len(head))
    out.append(line("all", r["overall"]))
    out += ["", "By confidence (non-test files; the default output shows the sure tier):"]
    for tier, c in r["tiers"].items():
        p = "-" if c["precision"] is None else f"{c['precision']:.2f}"
        rules = ", ".join(f"{code} {v['TP']}/{v['TP'] + v['FP']}" for code, v in c["by_rule"].items())
        out.append(f"  {tier:<9} TP {c['TP']:>3} FP {c['FP']:>3} deb {c['debatable']:>3} prec {p:>5}   ({rules})")
    out += ["", f"By split (held out: {', '.join(r['held_out'])}; held-out N: manifest"
            " `split: heldoutN`; non-test precision, test-file findings, recall):"]
    for name, sp in r["splits"].items():
        nt, rc_ = sp["non-test"], sp["recall"]
        p = "-" if nt["precision"] is None else f"{nt['precision']:.2f}"
        out.append(f"  {name:<10} non-test TP {nt['TP']:>3} FP {nt['FP']:>3} deb {nt['debatable']:>3} prec {p:>5}"
                   f" (unlabeled {nt['unlabeled']}) | test-file findings {sp['test_findings']:>3}"
                   f" | recall {rc_['found']}/{rc_['cases']}")
    for name, note in SPLIT_NOTES.items():
        sp = r["splits"].get(name)
        if not sp or not sp["repos"]:
            continue
        nt, rc_ = sp["non-test"], sp["recall"]
        p = "-" if nt["precision"] is None else f"{nt['precision']:.2f}"
        rec = "-" if not rc_["cases"] else f"{rc_['found'] / rc_['cases']:.2f}"
        out.append(f"  {name}, {note} ({', '.join(sp['repos'])}):"
                   f" precision {p} (TP {nt['TP']}, FP {nt['FP']}; debatable {nt['debatable']} apart),"
                   f" test-file findings {sp['test_findings']}, recall {rec} ({rc_['found']}/{rc_['cases']})")
    rc = r["recall"]
    out += ["", f"Recall over recall.yaml: {rc['found']}/{rc['cases']}"
            + ("" if rc["recall"] is None else f" = {rc['recall']:.2f}")]
    for row in rc["rows"]:
        where = f"{row['path']}" + (f":cell {row['cell']}" if row["cell"] else "") + f":{row['line']}"
        out.append(f"  {'found ' if row['found'] else 'MISSED'} {row['id']} {','.join(row['codes']):<12} {where}")
    out += ["", f"New findings without a label: {len(r['unlabeled'])}"]
    for u in r["unlabeled"]:
        where = u["path"] + (f":cell {u['cell']}" if u["cell"] else "") + f":{u['line']}"
        out.append(f"  {u['code']} {where}  {u['message']}")
    out.append(f"Labels whose finding is gone: {len(r['stale_labels'])}")
    for s in r["stale_labels"]:
        out.append(f"  {s['code']} {s['path']}" + (f":cell {s['cell']}" if s["cell"] else "") + f":{s['line']}")
    t = r["throughput"]
    out += ["", f"Throughput: {t['files']} files with {t['jobs']} worker processes, median of "
            f"{len(t['runs_s'])} runs {t['median_s']:.2f} s ({', '.join(f'{x:.2f}' for x in t['runs_s'])}): "
            f"{t['files_per_s']:.0f} files/s"]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--repeats", type=int, default=3, help="throughput runs (the median is reported)")
    parser.add_argument("--split", default="all",
                        help="all (default), dev (only the development repositories: keeps the held-out"
                             " ones unseen), or one row's name such as 'held-out 4'")
    args = parser.parse_args(argv)
    valid = ["all", *split_names(named_splits())]
    if args.split not in valid:
        parser.error(f"--split {args.split!r}: valid choices are {', '.join(repr(v) for v in valid)}")
    result = run(repeats=args.repeats, split=args.split)
    sys.stdout.write(json.dumps(result, indent=2) + "\n" if args.json else render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
