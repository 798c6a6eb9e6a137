"""Writing 32 rows into a 128 MiB buffer with `.at[].set` in a Python loop.

Outside `jit`, every `.at[i].set(row)` returns a brand-new array: each of the 32 writes copies
the whole buffer, and the index and row are sent to the device one call at a time.
"""
import numpy as np

import jax
import jax.numpy as jnp

rows = np.random.default_rng(0).normal(size=(32, 4096)).astype(np.float32)
buffer = jnp.zeros((8192, 4096), jnp.float32)         # 128 MiB

for i, row in enumerate(rows):
    buffer = buffer.at[i * 8].set(row)                # full copy of the buffer, every time
buffer.block_until_ready()
