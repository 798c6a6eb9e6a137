"""The same global array built one device shard at a time.

`addressable_devices_indices_map` says which rows each local device holds; each shard is
loaded, copied to its device and dropped before the next one is loaded, and
`jax.make_array_from_single_device_arrays` joins the shards into one global array. The host
never holds more than one shard; in a multi-process job the same loop loads only this
process's shards.
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

shards = []
for device, index in by_rows.addressable_devices_indices_map((ROWS, COLS)).items():
    rows = load_rows(index[0].start, index[0].stop)          # one shard on the host
    shards.append(jax.device_put(rows, device).block_until_ready())
    del rows                                                   # freed before the next load
x = jax.make_array_from_single_device_arrays((ROWS, COLS), by_rows, shards)
x.block_until_ready()
