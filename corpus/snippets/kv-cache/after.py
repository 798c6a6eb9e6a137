"""The same decoding with a cache preallocated at its maximum length and updated in place.

The cache keeps one shape, so the step compiles once; `lax.dynamic_update_slice` writes the new
position and, with the caches donated, XLA does that inside the existing buffers instead of
copying them. `key_value_seq_lengths` tells attention how many positions are filled.
"""
from functools import partial

import jax
import jax.numpy as jnp

B, N, H, D, STEPS = 4, 8, 64, 512, 16
MAX_LEN = STEPS + 1


def project(params, x):
    q, k, v = (jnp.einsum("bd,dnh->bnh", x, params[name])[:, None] for name in ("wq", "wk", "wv"))
    return q, k, v


@partial(jax.jit, donate_argnums=(1, 2))
def decode_step(params, cache_k, cache_v, x, pos):
    q, k, v = project(params, x)
    cache_k = jax.lax.dynamic_update_slice(cache_k, k, (0, pos, 0, 0))   # in the donated buffer
    cache_v = jax.lax.dynamic_update_slice(cache_v, v, (0, pos, 0, 0))
    filled = jnp.full((B,), pos + 1, jnp.int32)
    out = jax.nn.dot_product_attention(q, cache_k, cache_v, key_value_seq_lengths=filled)
    return out[:, 0].reshape(B, N * H) @ params["wo"], cache_k, cache_v


def example_args():
    keys = jax.random.split(jax.random.key(0), 4)
    params = {n: jax.random.normal(kk, (D, N, H)) * 0.02 for n, kk in zip(("wq", "wk", "wv"), keys)}
    params["wo"] = jax.random.normal(keys[3], (N * H, D)) * 0.02
    cache = jnp.zeros((B, MAX_LEN, N, H))
    return params, cache, jnp.zeros_like(cache), jnp.ones((B, D)), jnp.int32(1)


params, cache_k, cache_v, x, _ = example_args()
for pos in range(1, STEPS + 1):
    x, cache_k, cache_v = decode_step(params, cache_k, cache_v, x, jnp.int32(pos))
x.block_until_ready()
