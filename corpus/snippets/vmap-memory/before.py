"""Per-sequence top-k self-similarity, batched with `jax.vmap` over 64 sequences.

Each sequence builds a (1024, 1024) similarity matrix (4 MiB). `vmap` turns that into one
(64, 1024, 1024) array: 256 MiB materialised at once, because `top_k` needs the whole matrix.
"""
import numpy as np

import jax
import jax.numpy as jnp

BATCH, LENGTH, DIM, K = 64, 1024, 32, 8


def per_sequence(x):                     # x: (LENGTH, DIM)
    sim = x @ x.T                        # (LENGTH, LENGTH): the large intermediate
    top, _ = jax.lax.top_k(sim, K)       # needs the full matrix
    return top.mean(axis=-1)             # (LENGTH,)


score = jax.jit(jax.vmap(per_sequence))  # every sequence at once: (BATCH, LENGTH, LENGTH)


def example_args():
    rng = np.random.default_rng(0)
    return (jax.device_put(rng.normal(size=(BATCH, LENGTH, DIM)).astype(np.float32)),)


out = score(*example_args())
out.block_until_ready()
