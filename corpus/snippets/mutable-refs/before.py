"""A jitted state update without donation: every call writes a new 128 MiB state.

The caller still owns the input array, so XLA cannot write into it: during each call the old
and the new state are both alive, and peak memory is twice the state.
"""
import jax
import jax.numpy as jnp

SHAPE = (4096, 8192)                     # float32: 128 MiB


@jax.jit
def step(state):
    return 0.9 * state + 1.0             # a new output buffer every call


def example_args():
    return (jnp.zeros(SHAPE, jnp.float32),)


state, = example_args()
for _ in range(5):
    state = step(state)
state.block_until_ready()
