"""Greedy decoding with a KV cache that grows by concatenation.

Every step appends one position with `jnp.concatenate`, so the cache has a new shape each step:
the jitted step is traced and compiled again for every length, and each call copies the whole
cache into a fresh buffer while the old one is still alive.
"""
import jax
import jax.numpy as jnp

B, N, H, D, STEPS = 4, 8, 64, 512, 16


def project(params, x):
    q, k, v = (jnp.einsum("bd,dnh->bnh", x, params[name])[:, None] for name in ("wq", "wk", "wv"))
    return q, k, v                                     # each (B, 1, N, H)


@jax.jit
def decode_step(params, cache_k, cache_v, x):
    q, k, v = project(params, x)
    cache_k = jnp.concatenate([cache_k, k], axis=1)    # (B, t + 1, N, H): a new shape every step
    cache_v = jnp.concatenate([cache_v, v], axis=1)
    out = jax.nn.dot_product_attention(q, cache_k, cache_v)
    return out[:, 0].reshape(B, N * H) @ params["wo"], cache_k, cache_v


def example_args():
    keys = jax.random.split(jax.random.key(0), 4)
    params = {n: jax.random.normal(kk, (D, N, H)) * 0.02 for n, kk in zip(("wq", "wk", "wv"), keys)}
    params["wo"] = jax.random.normal(keys[3], (N * H, D)) * 0.02
    cache = jnp.zeros((B, 1, N, H))
    return params, cache, cache, jnp.ones((B, D))


params, cache_k, cache_v, x = example_args()
for _ in range(STEPS):
    x, cache_k, cache_v = decode_step(params, cache_k, cache_v, x)
x.block_until_ready()
