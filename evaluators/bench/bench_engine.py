"""Engine benchmark: prints a table of medians (these machines are noisy; never a pass/fail).

  time_ask_warm        in-process `Advisor.ask` over the eval questions (p50, p95)
  time_ask_cold        a fresh `jaxmem ask "..."` process with the index built (median of runs)
  time_ingest_full     ingest from scratch: empty store AND empty embedding cache
  time_ingest_noop     re-ingest with nothing changed

Usage: python evaluators/bench/bench_engine.py [--data DIR] [--skip-full] [--cold-runs N]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round((len(values) - 1) * p / 100)))]


def run_cli(args, env):
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "app.cli", *args], capture_output=True, text=True, env=env, cwd=ROOT)
    if proc.returncode != 0:
        raise SystemExit(f"jaxmem {' '.join(args)} failed: {proc.stderr[-500:]}")
    return time.perf_counter() - t, proc.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", help="data dir with a built index (default: a temp dir, built here)")
    ap.add_argument("--skip-full", action="store_true", help="skip the from-scratch ingest (minutes on 2 cores)")
    ap.add_argument("--cold-runs", type=int, default=5)
    ap.add_argument("--warm-rounds", type=int, default=3)
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="jaxmem-bench-"))
    data = Path(args.data) if args.data else tmp / "data"
    env = {**os.environ, "JAXMEM_DATA_DIR": str(data)}
    env.pop("JAXMEM_EMBED_CACHE", None)
    rows = []

    if not args.skip_full:
        scratch = {**env, "JAXMEM_DATA_DIR": str(tmp / "scratch")}  # empty store, empty embedding cache
        secs, out = run_cli(["ingest", "--json"], scratch)
        stats = json.loads(out)
        rows.append(("time_ingest_full", f"{secs:.1f} s", f"{stats['chunks']} chunks, {stats['embedded']} embedded, 1 run"))
        if not args.data:
            shutil.copytree(tmp / "scratch", data)
    elif not args.data:
        run_cli(["ingest", "--json"], env)

    noop = []
    for _ in range(3):
        secs, out = run_cli(["ingest", "--json"], env)
        assert json.loads(out)["embedded"] == 0
        noop.append(secs)
    rows.append(("time_ingest_noop", f"{statistics.median(noop):.2f} s", "median of 3 processes"))

    cold = []
    for _ in range(args.cold_runs):
        secs, _ = run_cli(["ask", "Varför tar JAX 75 % av GPU-minnet direkt när programmet startar?", "--json"], env)
        cold.append(secs)
    rows.append(("time_ask_cold", f"{statistics.median(cold):.2f} s",
                 f"median of {args.cold_runs} processes (min {min(cold):.2f}, max {max(cold):.2f})"))

    from app.advisor import Advisor
    from evaluators.retrieval.run import load_questions
    from ingest.config import Settings

    advisor = Advisor(Settings(data_dir=data))
    advisor.warm()
    questions = [q["q"] for q in load_questions()]
    lat = []
    for _ in range(args.warm_rounds):
        for q in questions:
            t = time.perf_counter()
            advisor.ask(q)
            lat.append((time.perf_counter() - t) * 1000)
    rows.append(("time_ask_warm p50", f"{pct(lat, 50):.1f} ms", f"{len(lat)} asks ({len(questions)} questions x {args.warm_rounds})"))
    rows.append(("time_ask_warm p95", f"{pct(lat, 95):.1f} ms", ""))

    width = max(len(r[0]) for r in rows)
    print(f"{'benchmark':{width}}  {'result':>10}  notes")
    print("-" * (width + 50))
    for name, value, note in rows:
        print(f"{name:{width}}  {value:>10}  {note}")
    print(f"\nmachine: {os.cpu_count()} cores; embeddings: {advisor.embeddings.name}")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
