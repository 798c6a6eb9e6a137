"""JM301's exception, checked: `jax.jit(f, out_shardings=...)` with a different option each
iteration compiles once per distinct option even when `f` is the same function, so a new
function there adds no compilation that hoisting the jit could save.

    python benchmarks/claims/jm301_options_per_iteration.py

Runs in a fresh interpreter with two host devices (XLA_FLAGS, set before JAX starts), counting
JAX's "Finished XLA compilation of jit(f)" log lines (jax_log_compiles). Output on jax 0.10.2,
CPU:

    same f, same out_shardings each iteration: 1 compiles of f in 3 iterations
    same f, a different out_shardings each iteration (3 distinct): 3 compiles of f in 3 iterations
"""
from __future__ import annotations

import os
import subprocess
import sys

CHILD = r"""
import logging, jax, jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
jax.config.update("jax_log_compiles", True)
n = {"c": 0}

class Count(logging.Handler):  # compilations of `f` itself, not of JAX's resharding helpers
    def emit(self, record):
        n["c"] += record.getMessage().startswith("Finished XLA compilation of jit(f)")

logging.getLogger("jax").addHandler(Count())
logging.getLogger("jax").propagate = False
mesh = Mesh(jax.devices(), ("d",))
# Three distinct output layouts of a 2-D array: replicated, split by rows, split by columns.
shardings = [NamedSharding(mesh, s) for s in (P(), P("d"), P(None, "d"))]
x = jnp.ones((4, 4)).block_until_ready()

def f(v):
    return v * 2.0

def run(label, pick):
    jax.clear_caches()
    n["c"] = 0
    for i in range(3):
        jax.jit(f, out_shardings=pick(i))(x).block_until_ready()
    print(f"{label}: {n['c']} compiles of f in 3 iterations")

run("same f, same out_shardings each iteration", lambda i: shardings[1])
run("same f, a different out_shardings each iteration (3 distinct)", lambda i: shardings[i])
"""


def main() -> None:
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=2"}
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, timeout=120)
    print(out.stdout.strip() or out.stderr.strip()[-400:])


if __name__ == "__main__":
    main()
