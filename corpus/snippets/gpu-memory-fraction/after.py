"""The same job limited to 25% of the GPU, so up to three such jobs fit side by side.

`XLA_PYTHON_CLIENT_MEM_FRACTION` sets the share of total memory to preallocate. Set it before
the backend starts; a job that needs more than its share fails with RESOURCE_EXHAUSTED.
"""
import os

os.environ["XLA_PYTHON_CLIENT_MEM_FRACTION"] = ".25"    # before JAX starts its backend

import numpy as np  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

x = jax.device_put(np.random.default_rng(0).normal(size=(1024, 1024)).astype(np.float32))
y = jnp.tanh(x @ x.T).sum()
y.block_until_ready()
