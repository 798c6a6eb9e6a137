"""Restoring a sharded checkpoint into a freshly initialised state, through a full host copy.

The checkpoint is 256 MiB of weights stored as 8 chunk files (one per shard, as Orbax/TensorStore
store arrays in chunks). A common restore pattern first initialises the state "to restore into",
then reads every chunk into one host array and places it with `device_put`. At the peak the
process holds the initialised state, the assembled host array and the restored arrays at once.
"""
import os

import numpy as np

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P

ROWS, COLS, CHUNKS = 16384, 4096, 8          # float32: 256 MiB, 32 MiB per chunk file


def save_checkpoint(directory):
    os.makedirs(directory, exist_ok=True)
    rng = np.random.default_rng(0)
    for i in range(CHUNKS):
        np.save(f"{directory}/w.{i}.npy",
                rng.standard_normal((ROWS // CHUNKS, COLS), dtype=np.float32))


save_checkpoint("ckpt")

mesh = jax.make_mesh((jax.device_count(),), ("fsdp",))   # 8 with the manifest's XLA_FLAGS
sharding = NamedSharding(mesh, P("fsdp", None))

# A concrete target: real buffers, only used for their shape, dtype and sharding.
state = jax.jit(lambda: jnp.zeros((ROWS, COLS), jnp.float32), out_shardings=sharding)()

# The whole array is assembled on the host, then copied to the devices.
host = np.concatenate([np.load(f"ckpt/w.{i}.npy") for i in range(CHUNKS)])
restored = jax.device_put(host, sharding)
restored.block_until_ready()
del host
state = restored
