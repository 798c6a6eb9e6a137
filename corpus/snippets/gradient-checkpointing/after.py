"""The same gradient with each scanned layer wrapped in `jax.checkpoint`.

Only the carry between layers is stored; each layer's internals are recomputed during the backward
pass. Wrapping the scan body (not the whole loss) is what saves memory: checkpointing the whole
function would recompute everything and still store everything.
"""
import numpy as np

import jax
import jax.numpy as jnp

DEPTH, BATCH, WIDTH = 32, 512, 512


@jax.checkpoint                      # recompute this layer's internals in the backward pass
def layer(h, w):
    return h + jnp.tanh(h @ w), None


def loss(weights, x):
    h, _ = jax.lax.scan(layer, x, weights)
    return jnp.mean(h ** 2)


grad_fn = jax.jit(jax.grad(loss))


def example_args():
    rng = np.random.default_rng(0)
    weights = rng.normal(scale=0.02, size=(DEPTH, WIDTH, WIDTH)).astype(np.float32)
    x = rng.normal(size=(BATCH, WIDTH)).astype(np.float32)
    return jax.device_put((weights, x))


grads = grad_fn(*example_args())
grads.block_until_ready()
