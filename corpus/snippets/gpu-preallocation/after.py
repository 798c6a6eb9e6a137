"""The same job with preallocation switched off, so JAX takes memory as it needs it.

The variable is read when the backend starts (the first JAX operation); setting it before
`import jax` is the safe habit. Memory is still not returned to the system once taken, and
on-demand allocation is more prone to fragmentation than the preallocated pool.
"""
import os

os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"   # before JAX starts its backend

import numpy as np  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

x = jax.device_put(np.random.default_rng(0).normal(size=(1024, 1024)).astype(np.float32))
y = jnp.tanh(x @ x.T).sum()
y.block_until_ready()
