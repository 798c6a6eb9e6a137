"""time_verify_overhead: what one isolated, measured run costs above a bare `import jax`.

    python benchmarks/bench_verify.py [--repeats 5]

Each row starts a fresh child process `--repeats` times and reports the median wall time:

  bare import        python -c "import jax"                          the floor of any JAX child
  bare first op      python -c "import jax; <one op>"                the floor of a useful child
  isolated first op  the same, through the sandbox                   + env scrub, rlimits, wait4
  probe, empty       an empty snippet under the probe                + hooks, markers, result JSON,
                                                                       live arrays, device info
  probe, tiny pair   a 10-step jitted loop under the probe, entry     + one memory_analysis compile
                     point analysed

The overhead column is the row minus the bare first-op floor. CPU seconds (user + system of
the reaped children) are shown too: on a shared, loaded machine they move less than wall time.
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from jaxmem.evaluators.verify.runner import child_env, run_snippet
from jaxmem.evaluators.verify.sandbox import run_isolated

FIRST_OP = "import jax, jax.numpy as jnp; jnp.ones(1).block_until_ready()"
TINY = """import numpy as np
import jax

step = jax.jit(lambda w, x: w - 0.1 * x)


def example_args():
    return (np.ones(8, np.float32), np.ones(8, np.float32))


w = jax.device_put(np.zeros(8, np.float32))
for _ in range(10):
    w = step(w, np.ones(8, np.float32))
w.block_until_ready()
"""


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _bare(code: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], env=child_env(), check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def _isolated(code: str) -> float:
    start = time.perf_counter()
    run = run_isolated([sys.executable, "-c", code], env=child_env())
    assert run.ok, run.reason()
    return time.perf_counter() - start


def _probe(path: Path, entry: dict | None = None) -> float:
    start = time.perf_counter()
    run = run_snippet(path, entry=entry)
    assert run.ok, run.error
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        empty = Path(tmp) / "empty.py"
        empty.write_text("")
        tiny = Path(tmp) / "tiny.py"
        tiny.write_text(TINY)
        cases = [
            ("bare import", lambda: _bare("import jax")),
            ("bare first op", lambda: _bare(FIRST_OP)),
            ("isolated first op", lambda: _isolated(FIRST_OP)),
            ("probe, empty", lambda: _probe(empty)),
            ("probe, tiny pair side", lambda: _probe(tiny, {"function": "step", "args": "example_args"})),
        ]
        rows = []
        for name, fn in cases:
            times, cpu = [], []
            for _ in range(args.repeats):
                c0 = _children_cpu()
                times.append(fn())
                cpu.append(_children_cpu() - c0)
            rows.append((name, statistics.median(times), min(times), max(times), statistics.median(cpu)))
    floor, cpu_floor = rows[1][1], rows[1][4]
    print(f"{'run':<24}{'median s':>10}{'min':>8}{'max':>8}{'over floor':>12}{'cpu s':>8}{'cpu over':>10}")
    for name, med, lo, hi, cpu_s in rows:
        print(f"{name:<24}{med:>10.3f}{lo:>8.3f}{hi:>8.3f}{med - floor:>+12.3f}{cpu_s:>8.3f}{cpu_s - cpu_floor:>+10.3f}")
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"\nfloor = bare first op; repeats = {args.repeats}; python {sys.version.split()[0]}; "
          f"load average {load} on {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
