"""JM309's claim, checked: `jax.clear_caches()` drops the compiled programs, so a jitted function
called again after it is traced and compiled again, even with the same shapes and dtypes.

    python benchmarks/claims/jm309_clear_caches_in_loop.py

Runs in a fresh interpreter, counting JAX's "Finished XLA compilation of jit(step)" log lines
(jax_log_compiles) over 5 iterations of a loop that calls the same jitted function on arrays of
one shape. Output on jax 0.10.2, CPU:

    no clear_caches in the loop: 1 compiles of step in 5 iterations
    clear_caches every iteration: 5 compiles of step in 5 iterations
    clear_caches every 2nd iteration: 3 compiles of step in 5 iterations
"""
from __future__ import annotations

import subprocess
import sys

CHILD = r"""
import logging, jax, jax.numpy as jnp
jax.config.update("jax_log_compiles", True)
n = {"c": 0}

class Count(logging.Handler):
    def emit(self, record):
        n["c"] += record.getMessage().startswith("Finished XLA compilation of jit(step)")

logging.getLogger("jax").addHandler(Count())
logging.getLogger("jax").propagate = False

@jax.jit
def step(x):
    return jnp.tanh(x) * 2.0

x = jnp.ones((64, 64))

def run(label, every):
    jax.clear_caches()
    n["c"] = 0
    for i in range(5):
        step(x).block_until_ready()
        if every and i % every == every - 1:
            jax.clear_caches()
    print(f"{label}: {n['c']} compiles of step in 5 iterations")

run("no clear_caches in the loop", 0)
run("clear_caches every iteration", 1)
run("clear_caches every 2nd iteration", 2)
"""


def main() -> None:
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=120)
    print(out.stdout.strip() or out.stderr.strip()[-400:])


if __name__ == "__main__":
    main()
