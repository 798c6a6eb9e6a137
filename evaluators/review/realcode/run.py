"""Real-code benchmark for `jaxmem review`: precision, recall and throughput on vendored JAX code.

    python -m evaluators.review.realcode.run              # tables
    python -m evaluators.review.realcode.run --json       # the same as JSON
    python -m evaluators.review.realcode.run --split dev  # development repositories only

Each vendored repository (realcode/<owner>__<repo>/) is reviewed on its own, with the defaults a
user gets from `jaxmem review <dir>`. Every finding is matched to the hand labels in labels.yaml
(path, cell, line, code); recall.yaml lists real anti-patterns found by reading the code. Both
files hold one mapping per `- ` item, one `key: value` per line, values written as JSON.

Two repositories are held out against overfitting the reviewer to the code it is tuned on: by a
fixed rule, the two with the fewest `vendored_bytes` in manifest.yaml. `--split dev` shows only
the others (per rule, recall, unlabeled findings); the default also prints held-out rows.

A second held-out part, "held-out 2", holds the repositories whose manifest entry says
`split: "heldout2"`: added after the round-1 precision work and read once, unseen
(baseline-round1.txt). Round 2 then developed on them too, so their row is no longer an unbiased
estimate. They take no part in the smallest-two rule, and `--split dev` leaves them out.

A third held-out part, "held-out 3", holds the repositories whose manifest entry says
`split: "heldout3"`: added after round 2 and labelled once, unseen, on the round-2 reviewer
(baseline-heldout3.txt). Round 3 changed JM401 after reading their false positives, so since then
their row is no longer an unbiased estimate either. Like held-out 2 they take no part in the
smallest-two rule, `--split dev` leaves them out, and they have their own row.
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

from evaluators.review import api, config

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


HELD_OUT_2 = "held-out 2"  # manifest entries with `split: "heldout2"`
HELD_OUT_3 = "held-out 3"  # manifest entries with `split: "heldout3"`


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
    without a `split` field (the held-out 2 and held-out 3 repositories are apart)."""
    sizes = {d: e["bytes"] for d, e in _manifest_entries().items() if "split" not in e and "bytes" in e}
    return frozenset(sorted(sizes, key=lambda d: (sizes[d], d))[:HELD_OUT_COUNT])


def held_out_2() -> frozenset[str]:
    """Folder names of the repositories marked `split: "heldout2"` in manifest.yaml."""
    return frozenset(d for d, e in _manifest_entries().items() if e.get("split") == "heldout2")


def held_out_3() -> frozenset[str]:
    """Folder names of the repositories marked `split: "heldout3"` in manifest.yaml."""
    return frozenset(d for d, e in _manifest_entries().items() if e.get("split") == "heldout3")


def split_of(rel: str, held: frozenset[str], held2: frozenset[str] = frozenset(),
             held3: frozenset[str] = frozenset()) -> str:
    top = rel.split("/", 1)[0]
    if top in held3:
        return HELD_OUT_3
    if top in held2:
        return HELD_OUT_2
    return "held-out" if top in held else "dev"


def is_test(rel: str) -> bool:
    parts = rel.split("/")
    return any(p in ("tests", "test") for p in parts[:-1]) or bool(_TEST_NAME.match(parts[-1]))


def review(paths: list[str], jobs: int | None = None) -> api.ReviewResult:
    """What `jaxmem review PATHS` runs: the nearest pyproject's [tool.jaxmem], else defaults."""
    cfg = config.load(config.find_pyproject(Path(paths[0])))
    return api.review_paths(paths, select=cfg.select, ignore=cfg.ignore, exclude=cfg.exclude,
                            max_file_size=cfg.max_file_size, jobs=jobs, progress=False,
                            include_tests=cfg.include_tests)


def key(rel: str, cell, line: int, code: str) -> tuple:
    return (rel, cell, line, code)


def precision(counts: Counter) -> float | None:
    judged = counts["TP"] + counts["FP"]
    return round(counts["TP"] / judged, 3) if judged else None


def run(repeats: int = 3, jobs: int = 2, split: str = "all") -> dict:
    """`split`: "all" (every repository, with dev and held-out summary rows) or "dev"."""
    held, held2, held3 = held_out(), held_out_2(), held_out_3()
    keep = (lambda rel: True) if split == "all" else (lambda rel: split_of(rel, held, held2, held3) == split)
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
    unlabeled, seen = [], set()
    for rel, f in findings:
        k = key(rel, f.cell, f.line, f.code)
        seen.add(k)
        label = labels.get(k)
        where = "test" if is_test(rel) else "non-test"
        if label is None:
            unlabeled.append({"path": rel, "cell": f.cell, "line": f.line, "code": f.code, "message": f.message})
            by_split[split_of(rel, held, held2, held3)][where]["unlabeled"] += 1
            continue
        table[f.code][where][label["label"]] += 1
        by_split[split_of(rel, held, held2, held3)][where][label["label"]] += 1
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
    for name in ("dev", "held-out", HELD_OUT_2, HELD_OUT_3) if split == "all" else (split,):
        rows_here = [r for r in recall_rows if split_of(r["path"], held, held2, held3) == name]
        nt, te = by_split[name]["non-test"], by_split[name]["test"]
        splits[name] = {
            "repos": sorted(p.name for p in repos() if split_of(p.name + "/", held, held2, held3) == name),
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
        "split": split, "held_out": sorted(held), "held_out_2": sorted(held2),
        "held_out_3": sorted(held3), "splits": splits,
        "by_rule": rows, "overall": overall,
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
    out += ["", f"By split (held out: {', '.join(r['held_out'])}; held-out 2 / held-out 3: manifest"
            " `split: heldout2` / `split: heldout3`; non-test precision, test-file findings, recall):"]
    for name, sp in r["splits"].items():
        nt, rc_ = sp["non-test"], sp["recall"]
        p = "-" if nt["precision"] is None else f"{nt['precision']:.2f}"
        out.append(f"  {name:<10} non-test TP {nt['TP']:>3} FP {nt['FP']:>3} deb {nt['debatable']:>3} prec {p:>5}"
                   f" (unlabeled {nt['unlabeled']}) | test-file findings {sp['test_findings']:>3}"
                   f" | recall {rc_['found']}/{rc_['cases']}")
    h2 = r["splits"].get(HELD_OUT_2)
    if h2 and h2["repos"]:
        nt, rc_ = h2["non-test"], h2["recall"]
        p = "-" if nt["precision"] is None else f"{nt['precision']:.2f}"
        rec = "-" if not rc_["cases"] else f"{rc_['found'] / rc_['cases']:.2f}"
        out.append(f"  held-out 2, used in development since round 2 (its unseen round-1 reading is in"
                   f" baseline-round1.txt) ({', '.join(h2['repos'])}):"
                   f" precision {p} (TP {nt['TP']}, FP {nt['FP']}; debatable {nt['debatable']} apart),"
                   f" recall {rec} ({rc_['found']}/{rc_['cases']})")
    h3 = r["splits"].get(HELD_OUT_3)
    if h3 and h3["repos"]:
        nt, rc_ = h3["non-test"], h3["recall"]
        p = "-" if nt["precision"] is None else f"{nt['precision']:.2f}"
        rec = "-" if not rc_["cases"] else f"{rc_['found'] / rc_['cases']:.2f}"
        out.append(f"  held-out 3, used in development since round 3 (its unseen reading is in baseline-heldout3.txt)"
                   f" ({', '.join(h3['repos'])}):"
                   f" precision {p} (TP {nt['TP']}, FP {nt['FP']}; debatable {nt['debatable']} apart),"
                   f" test-file findings {h3['test_findings']}, recall {rec} ({rc_['found']}/{rc_['cases']})")
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
    parser.add_argument("--split", choices=("all", "dev"), default="all",
                        help="dev: only the development repositories (keeps the held-out ones unseen)")
    args = parser.parse_args(argv)
    result = run(repeats=args.repeats, split=args.split)
    sys.stdout.write(json.dumps(result, indent=2) + "\n" if args.json else render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
