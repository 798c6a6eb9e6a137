"""Building a sharded global array by first materialising all of it on the host.

The whole 256 MiB array is created in NumPy and then split over the 8 devices by
`jax.device_put`: at the peak the process holds the full host array and all the device shards.
In a multi-process job every process would pay for the full host array (and, measured with
two processes, `device_put` of host data to a global sharding also compares it across processes).
"""
import numpy as np

import jax
from jax.sharding import NamedSharding, PartitionSpec as P

ROWS, COLS = 8 * 1024, 8192                      # 256 MiB of float32


def load_rows(start, stop):
    """Stand-in for a data loader: rows [start, stop) of the global array."""
    return np.arange(start * COLS, stop * COLS, dtype=np.float32).reshape(stop - start, COLS)


mesh = jax.make_mesh((jax.device_count(),), ("data",))
by_rows = NamedSharding(mesh, P("data"))

host = load_rows(0, ROWS)                        # the whole array on the host
x = jax.device_put(host, by_rows)
x.block_until_ready()
del host
