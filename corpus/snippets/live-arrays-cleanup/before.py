"""Keeping every step's gradients in a list "for debugging".

Each appended gradient is a 16 MiB device array that stays alive as long as the list does: after
20 steps the list holds 320 MiB although only the norms are ever looked at.
"""
import numpy as np

import jax
import jax.numpy as jnp

rng = np.random.default_rng(0)
w = jax.device_put(rng.normal(scale=0.01, size=(2048, 2048)).astype(np.float32))   # 16 MiB
x = jax.device_put(rng.normal(size=(64, 2048)).astype(np.float32))


@jax.jit
def step(w, x):
    grad = jax.grad(lambda w: jnp.mean(jnp.tanh(x @ w) ** 2))(w)
    return w - 0.1 * grad, grad


history = []
for _ in range(20):
    w, grad = step(w, x)
    history.append(grad)                       # keeps all 20 gradients alive
norms = [jnp.linalg.norm(g) for g in history]
jax.block_until_ready(norms)
