"""The same sweep with one jitted step that takes the learning rate as an argument.

The step is jitted once, at module level; the learning rate is a traced array argument, not a
constant baked into the program, so one compilation serves every value.
"""
import numpy as np

import jax
import jax.numpy as jnp

rng = np.random.default_rng(0)
x = jax.device_put(rng.normal(size=(256, 32)).astype(np.float32))
y = jax.device_put(rng.normal(size=(256, 1)).astype(np.float32))


def loss(w, x, y):
    return jnp.mean((x @ w - y) ** 2)


@jax.jit
def step(w, x, y, lr):
    return w - lr * jax.grad(loss)(w, x, y)


results = {}
for lr in (0.001, 0.003, 0.01, 0.03, 0.1, 0.3):
    lr_arg = jnp.float32(lr)
    w = jnp.zeros((32, 1), jnp.float32)
    for _ in range(20):
        w = step(w, x, y, lr_arg)
    results[lr] = loss(w, x, y)
jax.block_until_ready(results)
