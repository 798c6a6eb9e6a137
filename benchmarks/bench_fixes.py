"""`jaxmem review --fix` on the corpus's before.py snippets and the 12 real scripts of
benchmarks/runs/ (issue 24, item 4): does every fix apply and parse, does the code still run (with
the same output where it is deterministic), and does `--fix --run` move the expected metric?

    python benchmarks/bench_fixes.py [--python /work/runs-venv/bin/python] [--only NAME ...]
                                     [--timeout 600] [--interval 100] [--no-run] [--json out.json]

Not a test: the scripts are third-party code kept out of the repository (git-ignored; each folder's
manifest.yaml names where to fetch them), and their packages live in a separate virtual environment
(`--python`, default JAXMEM_RUN_PYTHON, else /work/runs-venv/bin/python).

Every target is reviewed with possible findings shown and fixed with unsafe fixes included (the
widest the fixer goes; each fix says whether it is safe). Static columns come from the fixer run
here; the measured ones from the command a user runs, in a child process:

    jaxmem review TARGET --diff --unsafe-fixes --show-possible --run FILE | --run-cmd CMD --format json

which runs the code as it is and a copy with every fix in it, in the sandbox, repeated where peak
RSS decides. Nothing is written into the targets (`--diff`).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import yaml

from jaxmem.evaluators.review import registry
from jaxmem.evaluators.review.api import review_paths
from jaxmem.evaluators.review.fixes import REGISTRY
from jaxmem.evaluators.review.fixes.apply import fix_notebook, fix_source, parses
from jaxmem.evaluators.review.fixes.base import Options

ROOT = Path(__file__).resolve().parent.parent
RUNS = ROOT / "benchmarks" / "runs"
SNIPPETS = ROOT / "corpus" / "snippets"
DEFAULT_PYTHON = "/work/runs-venv/bin/python"
JAXMEM = str(Path(sys.executable).parent / "jaxmem")


def targets(only: list[str]) -> list[dict]:
    out = []
    for d in sorted(SNIPPETS.iterdir()):
        if (d / "before.py").is_file():
            out.append({"name": f"snippet {d.name}", "key": d.name, "paths": [str(d / "before.py")],
                        "run": ["--run", str(d / "before.py")], "deterministic": None, "python": None})
    for d in sorted(RUNS.iterdir()):
        if not (d / "manifest.yaml").is_file():
            continue
        m = yaml.safe_load((d / "manifest.yaml").read_text())
        env = " ".join(f"{k}={v}" for k, v in (m.get("env") or {}).items())
        own = str(m.get("python", "")).startswith("/work/main/.venv")
        out.append({"name": f"script {d.name}", "key": d.name, "paths": [str(d)],
                    "run": ["--run-cmd", f"{env} {m['command']}".strip()],
                    "deterministic": bool(m.get("deterministic_output")), "python": None if own else "runs",
                    "present": any(d.glob("*.py"))})
    return [t for t in out if not only or t["key"] in only]


def static(t: dict, options: Options) -> dict:
    """The fixer here: fixable findings, fixes applied (safe/unsafe), findings with no fix, parse,
    idempotence, per file."""
    rules = registry.select([], [])
    result = review_paths(t["paths"], exclude=["*_original.py"], respect_gitignore=False, show_possible=True,
                          jobs=1)
    fixable = [f for f in result.findings if f.code in REGISTRY]
    applied, problems, idempotent = [], [], True
    for path in dict.fromkeys(f.path for f in fixable):
        text = Path(path).read_text()
        fix = fix_notebook if path.endswith(".ipynb") else fix_source
        out = fix(text, path, rules, unsafe=True, options=options, show_possible=True)
        applied += [(a.finding.code, a.fix.applicability, a.fix.title) for a in out.applied]
        problems += out.notes
        if not path.endswith(".ipynb") and parses(out.after) is not None:
            problems.append(f"{path}: the fixed source does not parse")
        again = fix(out.after, path, rules, unsafe=True, options=options, show_possible=True)
        idempotent &= again.after == out.after
    return {"findings": len(result.findings), "fixable": len(fixable), "codes": sorted({f.code for f in fixable}),
            "applied": applied, "problems": problems, "idempotent": idempotent,
            "no_fix": len(fixable) - len(applied)}


def measured(t: dict, python: str, timeout: float, interval: int) -> dict:
    cmd = [JAXMEM, "review", *t["paths"], "--diff", "--unsafe-fixes", "--show-possible", "--no-gitignore",
           "--exclude", "*_original.py", *t["run"], "--run-timeout", str(timeout), "--fix-interval", str(interval),
           "--format", "json"]
    if t["python"]:
        cmd += ["--run-python", python]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout * 8 + 120)
    try:
        doc = json.loads(proc.stdout)
    except json.JSONDecodeError:
        return {"error": (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"],
                "seconds": time.perf_counter() - start}
    return {"fix_run": doc.get("fix_run"), "fixes": doc.get("fixes"), "seconds": time.perf_counter() - start}


def _num(row: dict, key: str) -> str:
    v = row.get(key)
    if v is None:
        return "-"
    if row["metric"] in ("peak_rss", "device_peak_bytes"):
        return f"{v / 2**20:.0f} MiB"
    if row["metric"] == "alias_bytes":
        for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
            if v >= size:
                return f"{v / size:.1f} {unit}"
        return f"{v:.0f} B"
    if row["metric"] == "wall_time":
        return f"{v:.2f} s"
    return f"{v:g}"


def _moved(r: dict) -> str:
    """One expected metric: before -> after (per step where the run reports it), and its verdict
    where it is not the whole fix's (a row that cannot show its change here says so)."""
    text = f"{r['label']} {_num(r, 'before')} -> {_num(r, 'after')}"
    if r["metric"] == "alias_bytes" and r.get("per_step_after") is not None:
        text += f" ({_num({**r, 'after': r['per_step_after']}, 'after')}/step)"
    return text + (" (not measurable here)" if r["verdict"] == "not measurable here" else "")


def line(t: dict, s: dict, m: dict | None) -> list[str]:
    safe = sum(a[1] == "safe" for a in s["applied"])
    unsafe = sum(a[1] == "unsafe" for a in s["applied"])
    cells = [t["name"], str(s["fixable"]), f"{safe}/{unsafe}", str(s["no_fix"]),
             "yes" if not s["problems"] else "NO", "yes" if s["idempotent"] else "NO"]
    if m is None or not s["applied"]:
        return [*cells, "-", "-", "-", "-" if s["applied"] else "no fix to measure"]
    if "error" in m:
        return [*cells, "-", "-", "-", f"error: {' '.join(m['error'])[:80]}"]
    run = m.get("fix_run")
    if not run:
        return [*cells, "-", "-", "-", "not measured"]
    runs = f"{'yes' if run['runs_before'] else 'no'} -> {'yes' if run['runs_after'] else 'no'}"
    same = "-" if run.get("output_same") is None else "same" if run["output_same"] else (
        f"subset ({run['output_lines'][1]} of {run['output_lines'][0]} lines)" if run.get("output_subset")
        else "differs (only the last 4,000 chars kept)" if run.get("output_subset") is None else "differs")
    if t["deterministic"] is not None:
        same += " (deterministic)" if t["deterministic"] else " (not deterministic)"
    # Every metric a fix should move that this backend shows (a row not measurable here only where it
    # was measured, e.g. peak RSS below its noise margin for a small donation).
    shown = [r for r in run["rows"] if r.get("expect") and (r["verdict"] != "not measurable here"
                                                               or r.get("before") is not None)]
    metric = "; ".join(_moved(r) for r in shown) or "-"
    return [*cells, runs, same, metric, run["verdict"]]


HEAD = ["target", "fixable", "safe/unsafe applied", "no fix", "parses", "idempotent", "runs before -> after",
        "output", "metric the fixes should move", "verdict"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--python", default=os.environ.get("JAXMEM_RUN_PYTHON") or DEFAULT_PYTHON)
    p.add_argument("--only", nargs="*", default=[])
    p.add_argument("--timeout", type=float, default=600.0)
    p.add_argument("--interval", type=int, default=100)
    p.add_argument("--no-run", action="store_true", help="static columns only")
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    rows, records = [HEAD], []
    for t in targets(args.only):
        if t.get("present") is False:
            rows.append([t["name"], "third-party code not fetched (see benchmarks/runs/README.md)", *[""] * 8])
            continue
        s = static(t, Options(args.interval))
        m = None if args.no_run or not s["applied"] else measured(t, args.python, args.timeout, args.interval)
        rows.append(line(t, s, m))
        records.append({"target": t["name"], "static": s, "measured": m})
        print("  ".join(rows[-1]), file=sys.stderr, flush=True)
    print("| " + " | ".join(HEAD) + " |\n|" + "---|" * len(HEAD))
    for r in rows[1:]:
        print("| " + " | ".join(c.replace("|", "/") for c in r) + " |")
    print()
    for rec in records:
        for code, how, title in rec["static"]["applied"]:
            print(f"- {rec['target']}: {code} [{how}] {title}")
        for problem in rec["static"]["problems"]:
            print(f"- {rec['target']}: {problem}")
    if args.json:
        args.json.write_text(json.dumps(records, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
