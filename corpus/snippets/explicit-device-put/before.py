"""Scoring batches against a fixed NumPy embedding table.

The table lives in NumPy, so every call of the jitted function copies all 8 MiB of it to the
device again: one implicit host->device transfer per call, repeated for the whole loop.
"""
import numpy as np

import jax
import jax.numpy as jnp

rng = np.random.default_rng(0)
table = rng.normal(size=(4096, 512)).astype(np.float32)      # 8 MiB, never changes
queries = jnp.asarray(rng.normal(size=(50, 16, 512)).astype(np.float32))


@jax.jit
def top_score(table, q):
    return jnp.max(q @ table.T, axis=-1)


scores = []
for q in queries:
    scores.append(top_score(table, q))     # `table` is NumPy: copied on every call
jax.block_until_ready(scores)
