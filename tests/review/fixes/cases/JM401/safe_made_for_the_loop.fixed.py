"""A training loop at module level: the parameters are made for the loop and every call rebinds
them, so donating them is safe."""
import jax
import jax.numpy as jnp
from functools import partial


@partial(jax.jit, donate_argnums=0)  # the update
def update(params, x):
    grads = jax.grad(lambda p: jnp.sum((x @ p) ** 2))(params)
    return params - 0.01 * grads


params = jnp.zeros((1024, 1024), jnp.float32)
x = jnp.ones((8, 1024), jnp.float32)
for _ in range(100):
    params = update(params, x)    # old params die here
print(params.sum())
