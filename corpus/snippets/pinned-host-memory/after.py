"""The same step with the state in JAX's pinned_host memory kind.

The state stays a jax.Array whose buffer lives in page-locked host memory. The jitted step
moves it to device memory and writes the new state back to pinned host memory itself
(out_shardings), so Python never copies it and nothing waits for it; on a GPU those copies
are DMA transfers from page-locked memory, with no staging.
"""
import numpy as np

import jax
from jax.sharding import SingleDeviceSharding

dev = jax.devices()[0]
on_device = SingleDeviceSharding(dev, memory_kind="device")
on_host = SingleDeviceSharding(dev, memory_kind="pinned_host")


def _step(params, momentum, grads):
    momentum = jax.device_put(momentum, on_device)       # copy in, inside the program
    momentum = 0.9 * momentum + grads
    return params - 1e-3 * momentum, momentum


step = jax.jit(_step, out_shardings=(on_device, on_host))


def example_args():
    rng = np.random.default_rng(0)
    params = jax.device_put(rng.normal(size=(1024, 1024)).astype(np.float32), on_device)
    momentum = jax.device_put(np.zeros((1024, 1024), np.float32), on_host)
    grads = jax.device_put(rng.normal(size=(1024, 1024)).astype(np.float32), on_device)
    return params, momentum, grads


params, momentum, grads = example_args()
for _ in range(5):
    params, momentum = step(params, momentum, grads)     # momentum comes back as pinned_host
params.block_until_ready()
