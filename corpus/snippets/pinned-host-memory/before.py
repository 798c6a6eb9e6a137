"""A step whose large state waits in host RAM between uses, kept as NumPy arrays.

Each step copies the NumPy state to the device and reads the new state back with np.asarray:
a Python round trip per step (a host sync and a host->device transfer), and on a GPU the
copy comes from pageable memory, which the driver has to stage through a pinned buffer.
"""
import numpy as np

import jax
import jax.numpy as jnp


@jax.jit
def step(params, momentum, grads):
    momentum = 0.9 * momentum + grads
    return params - 1e-3 * momentum, momentum


def example_args():
    rng = np.random.default_rng(0)
    params = jax.device_put(rng.normal(size=(1024, 1024)).astype(np.float32))
    momentum = np.zeros((1024, 1024), np.float32)        # host copy, pageable NumPy memory
    grads = jax.device_put(rng.normal(size=(1024, 1024)).astype(np.float32))
    return params, momentum, grads


params, momentum, grads = example_args()
for _ in range(5):
    params, new_momentum = step(params, jax.device_put(momentum), grads)
    momentum = np.asarray(new_momentum)                  # device -> host, blocks every step
params.block_until_ready()
