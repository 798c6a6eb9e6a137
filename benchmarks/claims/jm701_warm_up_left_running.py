"""JM701's warm-up claim, checked: a jitted call returns once its work is queued, so a warm-up
whose result is dropped is still running when a timer started right after it begins; the timed
call (blocked on) waits behind it, and the time includes the rest of the warm-up's run.

    python benchmarks/claims/jm701_warm_up_left_running.py

Times one blocked call of a ~0.1 s jitted step (median of 5) after a warm-up that was blocked on,
and after one that was not. Output on jax 0.10.2, CPU (2 cores):

    warm-up blocked on:     timed call    84.5 ms
    warm-up left running:   timed call   185.5 ms (2.20x)
"""
from __future__ import annotations

import statistics
import time

import jax
import jax.numpy as jnp


def main() -> None:
    f = jax.jit(lambda x: jnp.tanh(x @ x) @ x)
    x = jnp.ones((1500, 1500))
    f(x).block_until_ready()  # compiled once, outside everything measured

    def timed(block_warm_up: bool) -> float:
        warm = f(x)
        if block_warm_up:
            warm.block_until_ready()
        t = time.perf_counter()
        f(x).block_until_ready()
        dt = time.perf_counter() - t
        warm.block_until_ready()
        return dt

    blocked = statistics.median(timed(True) for _ in range(5))
    left = statistics.median(timed(False) for _ in range(5))
    print(f"warm-up blocked on:     timed call {blocked * 1e3:7.1f} ms")
    print(f"warm-up left running:   timed call {left * 1e3:7.1f} ms ({left / blocked:.2f}x)")
    print(f"jax {jax.__version__}, {jax.devices()[0].platform}")


if __name__ == "__main__":
    main()
