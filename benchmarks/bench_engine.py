"""Engine benchmark: prints a table of medians, each next to a floor measured in the same run.

These machines are noisy, so figures are ratios against a floor taken in the same run, with the
floor and the measured thing interleaved; never a pass/fail.

  time_ask_warm        in-process `Advisor.ask` over the eval questions (p50, p95)
     floor: embedding the same question with the same model (the irreducible part of an answer)
  time_ask_cold        a fresh `jaxmem ask "..."` process with the index built, a short and a long question
     floor: a process that only imports what `jaxmem ask` imported (jaxmem's CLI, advisor and store
     modules, and chromadb); since 2026-12-04 an answer no longer imports chromadb (it searches the
     index's snapshot), so the same imports without chromadb are printed as a second, stricter floor
  time_ingest_noop     re-ingest with nothing changed
     floor: a process that only hashes the corpus files; also against the cold ask (target: no slower)
  time_ingest_full     ingest from scratch (empty data dir AND empty embedding cache), with the
                       shipped vectors and (unless --skip-unshipped) without them

Usage: python benchmarks/bench_engine.py [--skip-unshipped] [--cold-runs N] [--warm-rounds N]
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

SHORT_QUESTION = "Why does JAX take 75% of my GPU memory?"
LONG_QUESTION = ("My training loop gets slower every time I print the loss value, and the GPU sits idle "
                 "between steps; how do I log metrics without making the host wait for the device?")
IMPORT_FLOOR = "import jaxmem.app.cli, jaxmem.app.advisor, jaxmem.ingest.store, chromadb"
IMPORT_FLOOR_WITHOUT_CHROMA = "import jaxmem.app.cli, jaxmem.app.advisor, jaxmem.ingest.store"
HASH_FLOOR = ("import hashlib, pathlib, sys; h = hashlib.sha256(); "
              "[h.update(p.read_bytes()) for p in sorted(pathlib.Path(sys.argv[1]).rglob('*')) if p.is_file()]")


def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round((len(values) - 1) * p / 100)))]


def timed(cmd, env) -> tuple[float, str]:
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:4])} failed: {proc.stderr[-800:]}")
    return time.perf_counter() - t, proc.stdout


def cli(args, env):
    return timed([sys.executable, "-m", "jaxmem.app.cli", *args], env)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--skip-unshipped", action="store_true",
                    help="skip the from-scratch ingest without shipped vectors (about 11 minutes on 2 cores)")
    ap.add_argument("--cold-runs", type=int, default=5)
    ap.add_argument("--warm-rounds", type=int, default=3)
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="jaxmem-bench-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAXMEM_") and k not in ("CHROMA_HOST", "CHROMA_PORT")}
    rows = []  # (name, value, floor, ratio, note)

    # ---- full ingest: empty data dir and empty embedding cache ------------------------------------
    data = tmp / "data"
    secs, out = cli(["ingest", "--json"], {**env, "JAXMEM_DATA_DIR": str(data)})
    stats = json.loads(out)
    rows.append(("time_ingest_full (shipped vectors)", f"{secs:.1f} s", "", "",
                 f"{stats['chunks']} chunks, {stats['from_artifact']} from the artifact, {stats['embedded']} embedded"))
    if not args.skip_unshipped:
        corpus = tmp / "corpus"
        shutil.copytree(ROOT / "corpus", corpus, ignore=shutil.ignore_patterns("vectors"))
        secs, out = cli(["ingest", "--json"], {**env, "JAXMEM_DATA_DIR": str(tmp / "unshipped"), "JAXMEM_CORPUS_DIR": str(corpus)})
        stats = json.loads(out)
        rows.append(("time_ingest_full (no shipped vectors)", f"{secs:.1f} s", "", "",
                     f"{stats['chunks']} chunks, {stats['embedded']} embedded"))
        shutil.rmtree(tmp / "unshipped", ignore_errors=True)

    env = {**env, "JAXMEM_DATA_DIR": str(data)}

    # ---- no-op re-ingest against hashing the corpus -----------------------------------------------
    noop, hashing = [], []
    for _ in range(5):
        secs, out = cli(["ingest", "--json"], env)
        assert json.loads(out)["embedded"] == 0
        noop.append(secs)
        hashing.append(timed([sys.executable, "-c", HASH_FLOOR, str(ROOT / "corpus")], env)[0])
    n, f = statistics.median(noop), statistics.median(hashing)
    rows.append(("time_ingest_noop", f"{n:.2f} s", f"{f:.2f} s", f"{n / f:.1f}x", "median of 5; floor: hash the corpus files"))

    # ---- cold ask, short and long, against the import floor ---------------------------------------
    cold = {"short": [], "long": []}
    floor, strict = [], []
    for _ in range(args.cold_runs):
        floor.append(timed([sys.executable, "-c", IMPORT_FLOOR], env)[0])
        strict.append(timed([sys.executable, "-c", IMPORT_FLOOR_WITHOUT_CHROMA], env)[0])
        cold["short"].append(cli(["ask", SHORT_QUESTION, "--json"], env)[0])
        cold["long"].append(cli(["ask", LONG_QUESTION, "--json"], env)[0])
    f, g = statistics.median(floor), statistics.median(strict)
    for kind, values in cold.items():
        m = statistics.median(values)
        rows.append((f"time_ask_cold ({kind} question)", f"{m:.2f} s", f"{f:.2f} s", f"{m / f:.1f}x",
                     f"median of {args.cold_runs} processes (min {min(values):.2f}, max {max(values):.2f}); floor: imports"))
        rows.append(("  the same, against imports without chromadb", f"{m:.2f} s", f"{g:.2f} s", f"{m / g:.1f}x",
                     "a stricter floor: an answer no longer imports chromadb"))
    c = statistics.median(cold["short"])
    rows.append(("time_ingest_noop against time_ask_cold", f"{n:.2f} s", f"{c:.2f} s", f"{n / c:.1f}x",
                 "target: no slower than a cold ask (short question)"))

    # ---- warm ask against embedding the same question -------------------------------------------
    from jaxmem.app.advisor import Advisor
    from jaxmem.app.evaluation import load_questions, set_path
    from jaxmem.core.settings import Settings

    advisor = Advisor(Settings(data_dir=data))
    advisor.warm()
    questions = [q["q"] for q in load_questions(set_path("main"))]
    for q in questions[:20]:  # caches and branch predictors warm, as in a serving process
        advisor.ask(q)
    lat, emb = [], []
    for _ in range(args.warm_rounds):
        for q in questions:
            t = time.perf_counter()
            advisor.embeddings.embed_query(q)
            emb.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            advisor.ask(q)
            lat.append((time.perf_counter() - t) * 1000)
    e = statistics.median(emb)
    rows.append(("time_ask_warm p50", f"{pct(lat, 50):.1f} ms", f"{e:.1f} ms", f"{pct(lat, 50) / e:.2f}x",
                 f"{len(lat)} asks ({len(questions)} questions x {args.warm_rounds}); floor: median query embedding"))
    rows.append(("time_ask_warm p95", f"{pct(lat, 95):.1f} ms", f"{e:.1f} ms", f"{pct(lat, 95) / e:.2f}x", ""))

    width = max(len(r[0]) for r in rows)
    print(f"{'benchmark':{width}}  {'result':>9}  {'floor':>8}  {'ratio':>6}  notes")
    print("-" * (width + 80))
    for name, value, fl, ratio, note in rows:
        print(f"{name:{width}}  {value:>9}  {fl:>8}  {ratio:>6}  {note}")
    print(f"\nmachine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; embeddings: {advisor.embeddings.name}")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
