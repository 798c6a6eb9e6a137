"""JM701/JM704's queue claim for eager code, checked: JAX lets a bounded number of executions
queue ahead of the device (32, XLA's PjRt client), and every eager operation on a device array is
an execution of its own. So an unwaited timer over a Python loop of many eager operations returns
with all but the last few done: it measures the work, not dispatch.

    python benchmarks/claims/jm701_eager_operations_queue.py

Times an eager loop of 2n operations on a 1000x1000 array, returned and ready (median of 5).
Output on jax 0.10.2, CPU (2 cores):

    n=   10 eager ops=   20 returned     1.62 ms ready    13.44 ms ratio 0.12
    n=   30 eager ops=   60 returned    13.15 ms ready    18.11 ms ratio 0.73
    n=  100 eager ops=  200 returned    99.57 ms ready   105.87 ms ratio 0.94
    n= 1000 eager ops= 2000 returned   725.65 ms ready   734.52 ms ratio 0.99
"""
from __future__ import annotations

import time

import jax.numpy as jnp


def loop(x, n):
    for _ in range(n):
        x = x * 1.0001 + 0.5
    return x


def main() -> None:
    x0 = jnp.ones((1000, 1000))
    for n in (10, 30, 100, 1000):
        loop(x0, n).block_until_ready()
        returned, ready = [], []
        for _ in range(5):
            t0 = time.perf_counter()
            y = loop(x0, n)
            t1 = time.perf_counter()
            y.block_until_ready()
            t2 = time.perf_counter()
            returned.append(t1 - t0)
            ready.append(t2 - t0)
        r, w = sorted(returned)[2], sorted(ready)[2]
        print(f"n={n:5d} eager ops={2 * n:5d} returned {1e3 * r:8.2f} ms ready {1e3 * w:8.2f} ms ratio {r / w:.2f}")


if __name__ == "__main__":
    main()
