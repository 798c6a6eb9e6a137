import jax
import jax.numpy as jnp

x = jnp.ones((8,))
scaled = jax.jit(lambda v, s: v * s)
for scale in range(5):
    y = scaled(x, jnp.float32(scale))
y.block_until_ready()
