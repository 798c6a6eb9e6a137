import jax
import jax.numpy as jnp

x = jnp.ones((8,))
for scale in range(5):
    y = jax.jit(lambda v: v * scale)(x)      # a new function each time: compiled again
y.block_until_ready()
