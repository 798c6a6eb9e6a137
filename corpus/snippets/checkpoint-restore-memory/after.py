"""The same restore into an abstract target, one shard at a time.

`jax.eval_shape` gives the target's shapes, dtypes and shardings without allocating anything, and
each device's shard is read from the chunk it needs and placed on that device before the next is
read, so the host holds one chunk (32 MiB) instead of the whole array. This is what Orbax does when
it restores into `jax.ShapeDtypeStruct`s with shardings; on several hosts each process also reads
only its own shards.
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

# An abstract target: shape, dtype and sharding only, no buffers.
target = jax.eval_shape(jax.jit(lambda: jnp.zeros((ROWS, COLS), jnp.float32),
                                out_shardings=sharding))

rows_per_chunk = ROWS // CHUNKS


def read_rows(start, stop):
    """Read only the chunk files that hold rows [start, stop)."""
    parts = [np.load(f"ckpt/w.{i}.npy") for i in range(start // rows_per_chunk, stop // rows_per_chunk)]
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


shards = []
for device, index in target.sharding.addressable_devices_indices_map(target.shape).items():
    start, stop, _ = index[0].indices(ROWS)
    chunk = read_rows(start, stop)            # this shard's bytes, nothing else
    shards.append(jax.device_put(chunk, device))
    shards[-1].block_until_ready()            # finish the copy before the next chunk is read
    del chunk
state = jax.make_array_from_single_device_arrays(target.shape, target.sharding, shards)
del shards
state.block_until_ready()
