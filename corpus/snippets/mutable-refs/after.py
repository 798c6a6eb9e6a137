"""The same update on a `jax.Ref`: the jitted function writes the state in place.

A Ref passed to `jit` is effectively donated: XLA aliases its buffer to the update, so each
call writes into the same 128 MiB buffer, without `donate_argnums`. (Creating the Ref outside
`jit` copies its initial value once, so the peak at creation is still two states.)
"""
import jax
import jax.numpy as jnp

SHAPE = (4096, 8192)                     # float32: 128 MiB


@jax.jit
def step(state_ref):
    state_ref[...] = 0.9 * state_ref[...] + 1.0   # in-place write, nothing returned


def example_args():
    return (jax.new_ref(jnp.zeros(SHAPE, jnp.float32)),)


state_ref, = example_args()
for _ in range(5):
    step(state_ref)
jax.block_until_ready(state_ref[0, 0])   # waits for the writes; reads one element, not a copy
