"""JM902's claims, checked: what asking JAX for float64 gives, with and without x64.

    python benchmarks/claims/jm902_float64.py

Each setting runs in a fresh interpreter (x64 must be chosen before the first array). Output on
jax 0.10.2, CPU:

    x64 off: jnp.zeros((1024, 1024), dtype=jnp.float64) -> float32, 4194304 bytes, UserWarning: Explicitly requested dtype float64 requested in zeros is not available, and will be truncated to dtype float32
    x64 off: jnp.ones(1024).astype(jnp.float64) -> float32, 4096 bytes, UserWarning: Explicitly requested dtype float64 requested in astype is not available, and will be truncated to dtype float3
    x64 off: jnp.float64(1.5) -> float32, 4 bytes, UserWarning: Explicitly requested dtype float64 requested in asarray is not available, and will be truncated to dtype float
    x64 off: jax.random.normal(key, (1024,), dtype=jnp.float64) -> float32, 4096 bytes, UserWarning: Explicitly requested dtype float64 is not available, and will be truncated to dtype float32. To enable more dt
    x64 on: jnp.zeros((1024, 1024), dtype=jnp.float64) -> float64, 8388608 bytes, no warning
    x64 on: jnp.ones(1024).astype(jnp.float64) -> float64, 8192 bytes, no warning
    x64 on: jnp.float64(1.5) -> float64, 8 bytes, no warning
    x64 on: jax.random.normal(key, (1024,), dtype=jnp.float64) -> float64, 8192 bytes, no warning

So: without x64 there is no memory cost at all (float32, and a UserWarning says so, it is not
silent); with x64 the array takes 8 bytes per element, twice float32, which matters only for
large arrays.
"""
from __future__ import annotations

import os
import subprocess
import sys

CASES = (
    "jnp.zeros((1024, 1024), dtype=jnp.float64)",
    "jnp.ones(1024).astype(jnp.float64)",
    "jnp.float64(1.5)",
    "jax.random.normal(key, (1024,), dtype=jnp.float64)",
)
CHILD = """
import warnings, jax, jax.numpy as jnp
jax.config.update("jax_enable_x64", {x64})
key = jax.random.key(0)
for expr in {cases!r}:
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        x = eval(expr)
    msg = "; ".join(f"{{type(m.message).__name__}}: {{str(m.message)[:110]}}" for m in w) or "no warning"
    print(f"{{expr}} -> {{x.dtype}}, {{x.nbytes}} bytes, {{msg}}")
"""


def main() -> None:
    env = {k: v for k, v in os.environ.items() if k != "JAX_ENABLE_X64"}
    for x64 in (False, True):
        out = subprocess.run([sys.executable, "-c", CHILD.format(x64=x64, cases=CASES)], capture_output=True,
                             text=True, env=env, timeout=120)
        for line in (out.stdout.strip() or out.stderr.strip()[-300:]).splitlines():
            print(f"x64 {'on' if x64 else 'off'}: {line}")


if __name__ == "__main__":
    main()
