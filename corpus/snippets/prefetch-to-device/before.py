"""A training loop that hands each NumPy batch to the jitted step as it comes from the loader.

The copy to the device happens inside the call, implicitly, on the critical path: the step
cannot start until its batch has arrived, and nothing overlaps the copy with earlier work.
"""
import numpy as np

import jax
import jax.numpy as jnp


def loader(n_batches, rng=np.random.default_rng(0)):
    for _ in range(n_batches):            # stands in for a disk or network reader
        yield (rng.normal(size=(128, 256)).astype(np.float32),
               rng.normal(size=(128, 1)).astype(np.float32))


@jax.jit
def step(w, x, y):
    grad = jax.grad(lambda w: jnp.mean((x @ w - y) ** 2))(w)
    return w - 0.01 * grad


w = jnp.zeros((256, 1), jnp.float32)
for x, y in loader(100):
    w = step(w, x, y)                     # x, y are NumPy: transferred inside the call
w.block_until_ready()
