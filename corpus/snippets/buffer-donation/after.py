"""The same update with the parameter buffer donated.

`donate_argnums=0` tells XLA the input will not be used again, so the output is written into the
input's buffer: one copy of the parameters instead of two. The old `params` must not be read
after the call (it is deleted), which the rebinding `params = update(params, ...)` guarantees.
"""
from functools import partial

import jax
import jax.numpy as jnp

N = 64 * 1024 * 1024


@partial(jax.jit, donate_argnums=0)     # reuse params' buffer for the result
def update(params, velocity):
    return params - 0.01 * velocity


def example_args():
    return (jnp.zeros((1024, 1024)), jnp.ones((1024, 1024)))


params = jnp.zeros((N,), jnp.float32)
velocity = jnp.full((N,), 1e-3, jnp.float32)
for _ in range(5):
    params = update(params, velocity)
params.block_until_ready()
