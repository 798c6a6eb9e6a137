"""Timed regions that stop before the work finishes: a wait goes in before the timer is read."""
import time
import timeit

import jax
import jax.numpy as jnp


@jax.jit
def f(x):
    return jnp.tanh(x @ x.T)


def bench(x):
    f(x).block_until_ready()
    t0 = time.perf_counter()
    y = f(x)
    z = f(y)
    # report
    elapsed = time.perf_counter() - t0
    n = timeit.timeit(lambda: f(x), number=10)
    return elapsed, n


def loop(x, steps):
    f(x).block_until_ready()
    for step in range(steps):
        start = time.time()
        x = f(x)
        end = time.time()
        if step % 100 == 0:
            print(f"step {step} took {end - start}")
    return x
