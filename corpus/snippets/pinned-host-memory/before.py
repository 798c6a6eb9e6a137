"""Host-resident data that goes to the device on every step, kept as a NumPy array.

The table is cached in host RAM and used by every step. As NumPy it lives in ordinary pageable
memory: each call of the jitted step copies it host->device outside the program (an implicit
transfer per step), and on a GPU that copy is first staged through a page-locked buffer.
after.py differs only in the marked line that creates the host copy.
"""
import numpy as np

import jax
from jax.sharding import SingleDeviceSharding

dev = jax.devices()[0]
on_device = SingleDeviceSharding(dev, memory_kind="device")
on_host = SingleDeviceSharding(dev, memory_kind="pinned_host")


@jax.jit
def step(params, table):
    table = jax.device_put(table, on_device)             # the table in device memory
    return params - 1e-3 * table


def example_args():
    rng = np.random.default_rng(0)
    params = jax.device_put(rng.normal(size=(1024, 1024)).astype(np.float32), on_device)
    table = rng.normal(size=(1024, 1024)).astype(np.float32)
    table = np.ascontiguousarray(table)                  # THE CHANGE: pageable NumPy memory
    return params, table


params, table = example_args()
for _ in range(5):
    params = step(params, table)                         # the table goes to the device again
params.block_until_ready()
