"""JM108's claim, checked: a Python list of device scalars handed to NumPy (as `plt.plot`,
`np.mean` and `np.array` do) is converted element by element, one device->host copy per element;
stacking on the device first makes it one copy. Converting the whole growing list once per epoch
makes the copies grow with the square of the run's length.

    python benchmarks/claims/jm108_growing_list_of_device_values.py

Output on jax 0.10.2, CPU (2 cores), medians of 5:

      1000 device scalars: np.asarray(list)     9.14 ms, np.asarray(jnp.stack(list))    8.24 ms, a list of host floats   0.05 ms
     10000 device scalars: np.asarray(list)   127.99 ms, np.asarray(jnp.stack(list))   83.37 ms, a list of host floats   0.37 ms
"""
from __future__ import annotations

import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np


def main() -> None:
    step = jax.jit(lambda x: (x * 1.0001).sum() / x.size)
    x = jnp.ones((64,))
    for n in (1_000, 10_000):
        losses = [step(x + i) for i in range(n)]
        jax.block_until_ready(losses)

        def each(losses=losses) -> float:
            t = time.perf_counter()
            np.asarray(losses)  # what np.mean(losses) and ax.plot(losses) do
            return time.perf_counter() - t

        def stacked(losses=losses) -> float:
            t = time.perf_counter()
            np.asarray(jnp.stack(losses))
            return time.perf_counter() - t

        def host(losses=losses) -> float:
            values = [float(v) for v in losses]  # a host list, as one read per logging interval gives
            t = time.perf_counter()
            np.asarray(values)
            return time.perf_counter() - t

        a = statistics.median(each() for _ in range(5))
        b = statistics.median(stacked() for _ in range(5))
        c = statistics.median(host() for _ in range(5))
        print(f"{n:>6} device scalars: np.asarray(list) {a * 1e3:8.2f} ms, np.asarray(jnp.stack(list)) "
              f"{b * 1e3:7.2f} ms, a list of host floats {c * 1e3:6.2f} ms")
    print(f"jax {jax.__version__}, {jax.devices()[0].platform}")


if __name__ == "__main__":
    main()
