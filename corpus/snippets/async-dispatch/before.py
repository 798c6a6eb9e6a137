"""Timing a jitted function the way that seems natural, and is wrong twice.

The first call is included, so compilation is timed too; and `np.asarray` on each result is used
to "wait" for the device, which adds a device->host copy per call to what is being measured.
"""
import time

import numpy as np

import jax
import jax.numpy as jnp

x = jax.device_put(np.random.default_rng(0).normal(size=(512, 512)).astype(np.float32))


@jax.jit
def layer(x):
    return jnp.tanh(x @ x.T) @ x


start = time.perf_counter()
for _ in range(20):
    out = np.asarray(layer(x))          # forces a wait by copying the result to the host
elapsed = time.perf_counter() - start
print(f"{elapsed / 20 * 1e3:.2f} ms per call (includes compilation and copies)")
