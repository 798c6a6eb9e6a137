"""JM107's claim, checked: outside jit, an operation whose result's size depends on the values of
its operand (`jnp.unique` without `size=`, `jnp.nonzero`, a boolean mask index) reads the values
on the host, so it waits for the work that computes them; shape-keeping operations do not.

    python benchmarks/claims/jm107_data_dependent_shapes.py

Queues a jitted step (~0.1 s on CPU), then times how long each operation on its result takes to
return (median of 7). Output on jax 0.10.2, CPU (2 cores), the queued step 96.8 ms:

    sort           returns after    0.54 ms
    unique         returns after   86.91 ms
    unique size=   returns after    5.27 ms
    nonzero        returns after  111.32 ms
    mask index     returns after  101.46 ms
    where 3-arg    returns after    0.75 ms
"""
from __future__ import annotations

import time

import jax
import jax.numpy as jnp


def main() -> None:
    f = jax.jit(lambda x: jnp.tanh(x @ x) @ x)
    x = jnp.ones((1500, 1500))
    f(x).block_until_ready()

    def returns_after(op) -> float:
        y = f(x)  # queued: the operation below gets a value that is not computed yet
        t = time.perf_counter()
        op(y)
        dt = time.perf_counter() - t
        y.block_until_ready()
        return dt

    cases = [("sort", lambda y: jnp.sort(y[0])), ("unique", lambda y: jnp.unique(y[0])),
             ("unique size=", lambda y: jnp.unique(y[0], size=10)), ("nonzero", lambda y: jnp.nonzero(y[0] > 0)),
             ("mask index", lambda y: y[0][y[0] > 0]), ("where 3-arg", lambda y: jnp.where(y[0] > 0, y[0], 0))]
    for name, op in cases:
        ts = sorted(returns_after(op) for _ in range(7))
        print(f"{name:14s} returns after {ts[3] * 1e3:7.2f} ms")
    t = time.perf_counter()
    f(x).block_until_ready()
    print(f"the queued step itself: {(time.perf_counter() - t) * 1e3:.1f} ms (jax {jax.__version__})")


if __name__ == "__main__":
    main()
