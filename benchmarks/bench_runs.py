"""Static meets dynamic on the 12 real scripts of benchmarks/runs/ (issue 24): for each, the static
review of its folder, then its manifest's command run in the sandbox with per-line attribution.

    python benchmarks/bench_runs.py [--python /work/runs-venv/bin/python] [--only NAME ...]
                                    [--timeout 600] [--json out.json]

Not a test: the scripts are third-party code kept out of the repository (git-ignored; each folder's
manifest.yaml names where to fetch them), and their packages live in a separate virtual environment
(`--python`, default JAXMEM_RUN_PYTHON, else /work/runs-venv/bin/python; see
benchmarks/runs/requirements-runs-venv.txt). Prints, per script:

  static findings   confirmed / not seen / not run / not measurable per line, by code
  measured          per-step syncs, transfers and recompiles no rule had (JM011-JM014), at their lines
  per-step syncs    every line where the run measured a host sync on most steady steps (or in a
                    library's loop), and whether the manifest's reading of the code names that line
  not attributed    syncs, transfers or compiles the run could not put on a line (should be 0 syncs)
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections import Counter
from pathlib import Path

import yaml

from jaxmem.core.settings import Settings
from jaxmem.evaluators.review import api
from jaxmem.evaluators.review.dynamic import _is_per_step
from jaxmem.evaluators.verify.api import Limits, verify_command

RUNS = Path(__file__).resolve().parent / "runs"
DEFAULT_PYTHON = "/work/runs-venv/bin/python"


def manifest_lines(manifest: dict, words: tuple[str, ...]) -> dict[str, set[int]]:
    """Lines the manifest's per_step_costs name for costs whose text has one of `words`, per file."""
    out: dict[str, set[int]] = {}
    for cost in manifest.get("per_step_costs") or []:
        if not any(w in cost.get("what", "").lower() for w in words):
            continue
        for part in str(cost.get("line", "")).split(","):
            m = re.match(r"\s*(\d+)(?:\s*-\s*(\d+))?", part)
            if m:
                lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
                out.setdefault(cost["file"], set()).update(range(lo, hi + 1))
    return out


def one(folder: Path, python: str, timeout: float, settings: Settings) -> dict:
    manifest = yaml.safe_load((folder / "manifest.yaml").read_text())
    env = " ".join(f"{k}={v}" for k, v in (manifest.get("env") or {}).items())
    command = f"{env} {manifest['command']}".strip()
    static = api.review_paths([str(folder)], exclude=["*_original.py"], respect_gitignore=False,
                              show_possible=True, jobs=1)
    start = time.perf_counter()
    run = verify_command(command, folder, limits=Limits(timeout_s=timeout), sandbox=settings.sandbox,
                         python=python, hidden=[settings.data_dir])
    wall = time.perf_counter() - start
    added = api.attach_run(static.findings, "", run)
    status = Counter()
    by_status: dict[str, list[str]] = {}
    for f in static.findings:
        s = (f.runtime or {}).get("status", "no run")
        status[s] += 1
        by_status.setdefault(s, []).append(f"{f.code}@{Path(f.path).name}:{f.line}"
                                           + ("" if f.confidence == "sure" else "?"))
    attribution = run.get("attribution") or {}
    sync_lines = manifest_lines(manifest, ("sync", "device->host"))
    per_step_syncs = []
    for row in attribution.get("lines", []):
        stats = row["metrics"].get("host_syncs")
        if stats and _is_per_step(stats, "host_syncs"):
            named = row["line"] in sync_lines.get(Path(row["path"]).name, set())
            per = stats.get("per_step")
            per_step_syncs.append({
                "where": f"{row['path']}:{row['line']}",
                "per_step": per if per is not None else None,
                "per_run_of_line": stats.get("per_run") if per is None else None,
                "first_step": stats.get("first_step"), "steps": (stats.get("steady_steps") or 0) + 1,
                "loop": stats.get("loop"), "inside": stats.get("inside"), "manifest_names_line": named})
    return {
        "script": folder.name, "command": command, "ok": run.get("ok"), "error": run.get("error"),
        "tampered": run.get("tampered"), "wall_s": round(wall, 1), "child_wall_s": run.get("wall_time"),
        "totals": {k: run.get(k) for k in ("host_syncs", "h2d_transfers", "implicit_h2d_transfers",
                                          "compile_count", "peak_rss")},
        "static": dict(status), "static_by_status": by_status,
        "measured": [f"{f.code}@{Path(f.path).name}:{f.line} ({f.message.removeprefix('measured: ')})" for f in added],
        "per_step_syncs": per_step_syncs,
        "unattributed": attribution.get("unattributed") or {},
        "loops": attribution.get("loops", [])[:2],
    }


def table(rows: list[dict]) -> str:
    out = ["| script | run | static: confirmed / not seen / not run / not measurable | measured findings no rule had "
           "| per-step host syncs at | syncs not on a line |",
           "|---|---|---|---|---|---|"]
    for r in rows:
        run = "ok" if r["ok"] else ("not measurable" if r["tampered"] else f"failed: {(r['error'] or '')[:60]}")
        run += f", {r['wall_s']} s"
        s = r["static"]
        static = (f"{s.get('confirmed', 0)} / {s.get('not-seen', 0)} / {s.get('not-run', 0)} / "
                  f"{s.get('not-measurable', 0)}")
        if s.get("no run"):
            static += f" ({s['no run']} without a run)"
        measured = "; ".join(m.split(" (")[0] for m in r["measured"]) or "-"
        syncs = "; ".join(
            f"{p['where']} ({p['per_step']:g}/step" if p["per_step"] is not None else
            f"{p['where']} ({p['per_run_of_line']:g}/run of line, in {', '.join(p['inside'] or [])}"
            for p in r["per_step_syncs"])
        syncs = (syncs + ")") if syncs else "-"
        unattributed = r["unattributed"].get("host_syncs", 0)
        out.append(f"| {r['script']} | {run} | {static} | {measured} | {syncs} | {unattributed} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--python", default=os.environ.get("JAXMEM_RUN_PYTHON") or DEFAULT_PYTHON)
    parser.add_argument("--only", nargs="*", default=None, help="folder names to run (default: all)")
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--json", type=Path, default=None, help="also write every detail here")
    args = parser.parse_args(argv)
    settings = Settings()
    folders = sorted(p for p in RUNS.iterdir() if (p / "manifest.yaml").is_file())
    if args.only:
        folders = [p for p in folders if p.name in args.only]
    missing = [p.name for p in folders if len(list(p.glob("*.py"))) == 0]
    if missing:
        print(f"the third-party code is not here for {', '.join(missing)}: fetch it as benchmarks/runs/README.md "
              "says", file=sys.stderr)
        folders = [p for p in folders if p.name not in missing]
    rows = []
    for folder in folders:
        print(f"running {folder.name} ...", file=sys.stderr, flush=True)
        rows.append(one(folder, args.python, args.timeout, settings))
    print(table(rows))
    print()
    for r in rows:
        print(f"## {r['script']}: {r['command']}")
        print(f"   totals: {r['totals']}; child wall {r['child_wall_s'] and round(r['child_wall_s'], 1)} s")
        for status, items in sorted(r["static_by_status"].items()):
            print(f"   static {status}: {', '.join(items)}")
        for m in r["measured"]:
            print(f"   measured: {m}")
        for p in r["per_step_syncs"]:
            print(f"   per-step sync: {p}")
        if r["unattributed"]:
            print(f"   not attributed to a line: {r['unattributed']}")
        if r["error"]:
            print(f"   error: {r['error'][:300]}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
