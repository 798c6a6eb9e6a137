"""Two jobs meant to share one GPU, each started with the default memory fraction.

Each process's first JAX operation reserves 75% of the GPU's total memory; the second process
cannot get its 75% and fails with RESOURCE_EXHAUSTED although both jobs are small.
"""
import numpy as np

import jax
import jax.numpy as jnp

x = jax.device_put(np.random.default_rng(0).normal(size=(1024, 1024)).astype(np.float32))
y = jnp.tanh(x @ x.T).sum()
y.block_until_ready()
