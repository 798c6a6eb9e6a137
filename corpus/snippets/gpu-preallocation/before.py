"""A small evaluation job started with JAX's default GPU allocator settings.

On a GPU, the first JAX operation reserves 75% of the device's total memory for JAX's pool,
however little the job needs: another process on the same GPU then finds the memory taken.
"""
import numpy as np

import jax
import jax.numpy as jnp

x = jax.device_put(np.random.default_rng(0).normal(size=(1024, 1024)).astype(np.float32))
y = jnp.tanh(x @ x.T).sum()
y.block_until_ready()
