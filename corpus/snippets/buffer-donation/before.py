"""A jitted momentum update applied to a 256 MiB parameter array, without donation.

`params = update(params, ...)` replaces the old array, but JAX cannot know that: the compiled
function must allocate a fresh output while the input is still alive, so each step briefly holds
two copies of the parameters.
"""
import jax
import jax.numpy as jnp

N = 64 * 1024 * 1024            # 64 Mi float32 = 256 MiB


@jax.jit
def update(params, velocity):
    return params - 0.01 * velocity


def example_args():
    return (jnp.zeros((1024, 1024)), jnp.ones((1024, 1024)))


params = jnp.zeros((N,), jnp.float32)
velocity = jnp.full((N,), 1e-3, jnp.float32)
for _ in range(5):
    params = update(params, velocity)       # old params stay alive until the output exists
params.block_until_ready()
