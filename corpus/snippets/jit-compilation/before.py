"""A learning-rate sweep that builds a new jitted function for every value.

`jax.jit` of a fresh lambda is a new function to JAX, so each iteration traces and compiles the
step again; the compiled code is thrown away with the lambda.
"""
import numpy as np

import jax
import jax.numpy as jnp

rng = np.random.default_rng(0)
x = jax.device_put(rng.normal(size=(256, 32)).astype(np.float32))
y = jax.device_put(rng.normal(size=(256, 1)).astype(np.float32))


def loss(w, x, y):
    return jnp.mean((x @ w - y) ** 2)


results = {}
for lr in (0.001, 0.003, 0.01, 0.03, 0.1, 0.3):
    step = jax.jit(lambda w, x, y: w - lr * jax.grad(loss)(w, x, y))   # new function each time
    w = jnp.zeros((32, 1), jnp.float32)
    for _ in range(20):
        w = step(w, x, y)
    results[lr] = loss(w, x, y)
jax.block_until_ready(results)
