from functools import partial

import jax
import jax.numpy as jnp

N = 48 * 1024 * 1024          # 192 MiB of float32


@partial(jax.jit, donate_argnums=0)
def update(params, delta):
    return params + delta


def example_args():
    return (jnp.zeros((1024,)), jnp.ones((1024,)))


params = jnp.zeros((N,), jnp.float32)
delta = jnp.ones((N,), jnp.float32)
for _ in range(3):
    params = update(params, delta)
params.block_until_ready()
