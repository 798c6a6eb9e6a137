"""The same training loop, with every transfer explicit and the transfer guard switched on.

Each batch is moved with `jax.device_put`, which the guard allows; inside the loop the guard is
set to "disallow", so an implicit transfer that creeps back in raises instead of going unseen.
"""
import numpy as np

import jax
import jax.numpy as jnp

rng = np.random.default_rng(0)
inputs = rng.normal(size=(100, 64, 32)).astype(np.float32)
targets = rng.normal(size=(100, 64, 1)).astype(np.float32)


@jax.jit
def step(w, x, y):
    def loss(w):
        return jnp.mean((x @ w - y) ** 2)
    return w - 0.01 * jax.grad(loss)(w)


w = jnp.zeros((32, 1), jnp.float32)
with jax.transfer_guard("disallow"):        # implicit transfers raise from here on
    for x, y in zip(inputs, targets):
        x, y = jax.device_put((x, y))       # explicit, so allowed, and visible in the code
        w = step(w, x, y)
w.block_until_ready()
