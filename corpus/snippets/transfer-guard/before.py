"""A linear-regression training loop fed with NumPy batches.

Each call of `step` receives NumPy arrays, so JAX copies them to the device on every call:
an implicit host->device transfer that nothing in the code shows.
"""
import numpy as np

import jax
import jax.numpy as jnp

rng = np.random.default_rng(0)
inputs = rng.normal(size=(100, 64, 32)).astype(np.float32)    # 100 batches, built on the host
targets = rng.normal(size=(100, 64, 1)).astype(np.float32)


@jax.jit
def step(w, x, y):
    def loss(w):
        return jnp.mean((x @ w - y) ** 2)
    return w - 0.01 * jax.grad(loss)(w)


w = jnp.zeros((32, 1), jnp.float32)
for x, y in zip(inputs, targets):
    w = step(w, x, y)             # x and y are NumPy: two hidden transfers per step
w.block_until_ready()
